//! The words of judgment: the states a broker's and a controller's verdict can take, and
//! every rule a verdict can cite, typed: its name (on /status, in webhooks' evidence and
//! `rules`, in logs and the README's rule tables, a contract) and the states it may set.
//! A rule is matched by its variant, never by its name, so a rename is one line here and
//! the compiler finds every use; `hit` checks in debug builds that a rule sets only the
//! states this table gives it, and a test holds the README's tables to it.

use std::fmt;

use serde::{Serialize, Serializer};

/// A broker's verdict state, least bad first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BrokerState {
    Healthy,
    /// The watchdog cannot see the cluster at all; it does not guess.
    Unknown,
    Degraded,
    Zombie,
    Down,
}

impl BrokerState {
    pub const ALL: [BrokerState; 5] = [
        BrokerState::Healthy,
        BrokerState::Unknown,
        BrokerState::Degraded,
        BrokerState::Zombie,
        BrokerState::Down,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            BrokerState::Healthy => "healthy",
            BrokerState::Unknown => "unknown",
            BrokerState::Degraded => "degraded",
            BrokerState::Zombie => "zombie",
            BrokerState::Down => "down",
        }
    }
}

/// A controller's verdict state, least bad first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ControllerState {
    Healthy,
    /// Nothing says how it is: it is not asked directly and no leader describes it.
    Unknown,
    /// Behind the quorum's leader, or not heard from by it: a voter the majority can do
    /// without, for now.
    Lagging,
    /// Alive at process or port level, not doing its job.
    Zombie,
    Down,
}

impl ControllerState {
    pub const ALL: [ControllerState; 5] = [
        ControllerState::Healthy,
        ControllerState::Unknown,
        ControllerState::Lagging,
        ControllerState::Zombie,
        ControllerState::Down,
    ];

    pub fn as_label(self) -> &'static str {
        match self {
            ControllerState::Healthy => "healthy",
            ControllerState::Unknown => "unknown",
            ControllerState::Lagging => "lagging",
            ControllerState::Zombie => "zombie",
            ControllerState::Down => "down",
        }
    }
}

/// Declares a rule enum with its names and states, in the order of the README's table.
macro_rules! rule_table {
    (
        $(#[$enum_doc:meta])*
        $rule:ident of $state:ident {
            $( $(#[$doc:meta])* $id:ident = $name:literal => [$($s:ident),*], )*
        }
    ) => {
        $(#[$enum_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $rule {
            $( $(#[$doc])* $id, )*
        }

        impl $rule {
            /// Every rule, in the README table's order.
            pub const ALL: &'static [$rule] = &[$($rule::$id),*];

            /// Its name: a contract with /status, webhooks and alert routing.
            pub const fn name(self) -> &'static str {
                match self {
                    $($rule::$id => $name,)*
                }
            }

            /// The states it may set; empty when it keeps the state the others decided.
            pub const fn states(self) -> &'static [$state] {
                match self {
                    $($rule::$id => &[$($state::$s),*],)*
                }
            }

            /// The rule of this name, if there is one.
            pub fn named(name: &str) -> Option<$rule> {
                $rule::ALL.iter().copied().find(|r| r.name() == name)
            }

            /// Whether it may set `state`.
            pub fn allows(self, state: $state) -> bool {
                let states = self.states();
                states.is_empty() || states.contains(&state)
            }
        }

        impl fmt::Display for $rule {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        impl Serialize for $rule {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }
    };
}

rule_table! {
    /// A broker verdict's rules.
    Rule of BrokerState {
        PortClosed = "port_closed" => [Down],
        ShutDownCleanly = "shut_down_cleanly" => [Down],
        Unreachable = "unreachable" => [Down, Degraded],
        NotRegistered = "not_registered" => [Down],
        NotProbedYet = "not_probed_yet" => [Unknown],
        AuthFailed = "auth_failed" => [Unknown],
        ProtocolError = "protocol_error" => [Unknown],
        ClusterInvisible = "cluster_invisible" => [Unknown],
        /// From the round's requests, and from the continuous liveness check (which says
        /// unknown while no peer answers either).
        NoAnswer = "no_answer" => [Zombie, Unknown],
        RequestError = "request_error" => [Degraded],
        Restarting = "restarting" => [Down],
        LivenessFlapping = "liveness_flapping" => [Degraded],
        /// Degraded within moments of being down: a restart registering, not a zombie.
        FencedButServing = "fenced_but_serving" => [Zombie, Degraded],
        StaleMetadata = "stale_metadata" => [Zombie],
        GroupCoordinatorStalled = "group_coordinator_stalled" => [Zombie],
        TxnCoordinatorStalled = "txn_coordinator_stalled" => [Zombie],
        TxnCoordinatorFailing = "txn_coordinator_failing" => [Zombie],
        GroupCoordinatorFailing = "group_coordinator_failing" => [Zombie],
        StaleLeader = "stale_leader" => [Zombie],
        OutOfEveryIsr = "out_of_every_isr" => [Zombie, Degraded],
        ReassignmentStalled = "reassignment_stalled" => [Zombie],
        OutOfSomeIsrs = "out_of_some_isrs" => [Degraded],
        FollowersCannotReplicate = "followers_cannot_replicate" => [Degraded],
        MetadataDisagreement = "metadata_disagreement" => [Degraded],
        CanaryWritesFail = "canary_writes_fail" => [Zombie, Degraded],
        CanaryNotEnoughReplicas = "canary_not_enough_replicas" => [Degraded],
        Slow = "slow" => [Degraded],
        LogDirFailed = "log_dir_failed" => [Degraded],
        /// The answering controller's words on a broker that is not healthy: it keeps the
        /// state the broker's own evidence gave it.
        ZookeeperController = "zookeeper_controller" => [],
        LogDirFilling = "log_dir_filling" => [Degraded],
        // Host mode: the broker's process as /proc shows it.
        ProcessStopped = "process_stopped" => [Zombie],
        /// Degraded when something answers at its address all the same: the lookup is more
        /// likely wrong than Kafka.
        ProcessGone = "process_gone" => [Down, Degraded],
        ProcessExited = "process_exited" => [Down],
        ProcessAliveNoAnswer = "process_alive_no_answer" => [Zombie],
        PortNotListening = "port_not_listening" => [Degraded],
        LogDirLowSpace = "log_dir_low_space" => [Degraded],
        LogDirUnreadable = "log_dir_unreadable" => [Degraded],
    }
}

rule_table! {
    /// A controller verdict's rules.
    ControllerRule of ControllerState {
        PortClosed = "controller_port_closed" => [Down],
        Unreachable = "controller_unreachable" => [Down],
        NoAnswer = "controller_no_answer" => [Zombie],
        Wedged = "controller_wedged" => [Zombie],
        NotFetching = "controller_not_fetching" => [Lagging],
        Behind = "controller_behind" => [Lagging],
        NotAsked = "controller_not_asked" => [Unknown],
        NotDescribed = "controller_not_described" => [Unknown],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, BTreeSet};

    /// The states the README's `| `name` | states | ...` rows give each rule, over every
    /// row that names it (`no_answer` has a second, "(liveness)", for the same rule seen by
    /// another source).
    fn readme_states() -> BTreeMap<String, BTreeSet<String>> {
        let text = include_str!("../../README.md");
        let mut rows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for line in text.lines() {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            if cells.len() < 4 || !cells[0].is_empty() {
                continue;
            }
            let name = cells[1].split_whitespace().next().unwrap_or_default();
            let Some(name) = name.strip_prefix('`').and_then(|c| c.strip_suffix('`')) else {
                continue;
            };
            rows.entry(name.to_string())
                .or_default()
                .extend(cells[2].split(" / ").map(str::to_string));
        }
        rows
    }

    /// The state column a README row should give a rule: its states' labels, or the words
    /// for a rule that keeps the state the others decided.
    fn states_in_words(labels: Vec<&str>, own: &str) -> BTreeSet<String> {
        if labels.is_empty() {
            return BTreeSet::from([own.to_string()]);
        }
        labels.into_iter().map(str::to_string).collect()
    }

    #[test]
    fn names_are_unique_snake_case_and_every_rule_is_listed_once() {
        let mut names: Vec<&str> = Rule::ALL.iter().map(|r| r.name()).collect();
        names.extend(ControllerRule::ALL.iter().map(|r| r.name()));
        let count = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), count, "a name used twice");
        for n in names {
            assert!(n.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{n}");
        }
        assert_eq!(Rule::ALL.len(), 37);
        assert_eq!(ControllerRule::ALL.len(), 8);
    }

    #[test]
    fn the_readme_rule_tables_name_every_rule_with_its_states() {
        let rows = readme_states();
        let table = Rule::ALL
            .iter()
            .map(|r| {
                let labels = r.states().iter().map(|s| s.as_label()).collect();
                (r.name(), states_in_words(labels, "the broker's own"))
            })
            .chain(ControllerRule::ALL.iter().map(|r| {
                let labels = r.states().iter().map(|s| s.as_label()).collect();
                (r.name(), states_in_words(labels, "the controller's own"))
            }));
        let mut wrong = Vec::new();
        for (name, states) in table {
            match rows.get(name) {
                Some(s) if *s == states => {}
                found => wrong.push(format!(
                    "{name}: README says {found:?}, the table {states:?}"
                )),
            }
        }
        assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    }

    #[test]
    fn a_rule_allows_its_states_only_and_one_without_states_keeps_any() {
        assert!(Rule::Unreachable.allows(BrokerState::Degraded));
        assert!(!Rule::Slow.allows(BrokerState::Zombie));
        assert!(Rule::ZookeeperController.allows(BrokerState::Zombie));
        assert_eq!(
            serde_json::to_value(Rule::NoAnswer).unwrap(),
            serde_json::json!("no_answer")
        );
        assert_eq!(Rule::OutOfEveryIsr.to_string(), "out_of_every_isr");
    }
}
