//! The words of judgment: the states a broker's and a controller's verdict can take, and
//! every rule a verdict can cite, typed: its name (on /status, in webhooks' evidence and
//! `rules`, in logs and docs/rules.md, a contract), the states it may set and what it means.
//! A rule is matched by its variant, never by its name, so a rename is one line here and
//! the compiler finds every use; `hit` checks in debug builds that a rule sets only the
//! states this table gives it. docs/rules.md is rendered from this table, and a test fails
//! when the committed file differs (`KW_DOCS_WRITE=1 cargo test --lib judge::rule` rewrites it).

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

/// Declares a rule enum with its names, states and meanings, most severe first (the order of
/// docs/rules.md).
macro_rules! rule_table {
    (
        $(#[$enum_doc:meta])*
        $rule:ident of $state:ident {
            $( $(#[$doc:meta])* $id:ident = $name:literal => [$($s:ident),*] $meaning:literal, )*
        }
    ) => {
        $(#[$enum_doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $rule {
            $( $(#[$doc])* $id, )*
        }

        impl $rule {
            /// Every rule, most severe first.
            pub const ALL: &'static [$rule] = &[$($rule::$id),*];

            /// Its name: a contract with /status, webhooks and alert routing.
            pub const fn name(self) -> &'static str {
                match self {
                    $($rule::$id => $name,)*
                }
            }

            /// When it fires, in an operator's words (docs/rules.md's third column).
            pub const fn meaning(self) -> &'static str {
                match self {
                    $($rule::$id => $meaning,)*
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
        PortClosed = "port_closed" => [Down]
            "connection refused or the name does not resolve, while the cluster still names it \
            leader or in-sync replica of some partition (a crash or a kill: paged at once); the \
            liveness check sees it too: new connections refused, within one interval of a kill",
        ShutDownCleanly = "shut_down_cleanly" => [Down]
            "connection refused, and it leads no partition and is in no ISR: Kafka's controlled \
            shutdown moved its leaderships away and took it out of the ISRs before the listener \
            closed (a restart, a maintenance stop). Its state is `down` at once, but nobody is \
            paged unless it (or what follows: restarting, registering, catching up, the replicas \
            it is missing) is still not healthy after `restart_grace_secs`",
        Unreachable = "unreachable" => [Down, Degraded]
            "TCP connect times out; degraded while the other brokers still list it as registered \
            (the fault may be on the watchdog's path) or are split on it (registration \
            `unknown`), or host mode sees its process alive",
        NotRegistered = "not_registered" => [Down]
            "partitions name it as a replica, nobody lists it, its address was never seen",
        NotProbedYet = "not_probed_yet" => [Unknown]
            "partitions name it as a replica and this round's answers list it, but its address was \
            learned this round: the next round probes it",
        AuthFailed = "auth_failed" => [Unknown]
            "the watchdog cannot get in: SASL refused its credentials, or the TLS handshake failed \
            (its certificate refused, the broker's expired or not trusted), or the broker refused \
            a whole request as not authorized (its ACLs deny the watchdog's principal: the \
            incident asks for the rights in [install.md](install.md)). The watchdog's access, not \
            the broker's health: incident kind `watchdog_access`, never `zombie`",
        ProtocolError = "protocol_error" => [Unknown]
            "the broker answered something the watchdog cannot decode (or no version it speaks): a \
            compatibility problem, incident kind `watchdog_access`, never `zombie`",
        ClusterInvisible = "cluster_invisible" => [Unknown]
            "no broker of the cluster answered: the watchdog does not guess",
        /// The watchdog's own sickness held out of a broker's verdict (issue 38 item 4).
        WatchdogUnwell = "watchdog_unwell" => [Unknown]
            "the evidence that would have made it not healthy rests on the watchdog's own \
            timing (a silence, a request that timed out or took long, a probe left unanswered, \
            canary writes that timed out) and was measured while the watchdog itself was unwell: paused (stopped and continued, its VM \
            paused), its event loop lagging (CPU starvation), its CPU cgroup throttling it, its \
            clocks jumping (a suspend, a step) or its own packets lost \
            (`kafka_watchdog_self_degraded`). Its own sickness is never a broker's fault: the \
            broker is `unknown` and nobody is paged for it. A silence counts again from the end \
            of the episode (a broker still silent a threshold after it is a zombie then), a \
            round's evidence from the first round clear of it, the coordinators' 10 s after it. \
            Kafka's own word still counts (a broker the others list as fenced or absent is judged \
            as ever), and a broker already `zombie` or `down` before the episode stays so",
        /// From the round's requests, and from the continuous liveness check (which says
        /// unknown while no peer answers either).
        NoAnswer = "no_answer" => [Zombie, Unknown]
            "TCP accepted, but ApiVersions or Metadata got no answer in time (or the connection \
            closed); also a connect that times out after it accepted without answering (a frozen \
            process: its accept queue filled up, 50-90 s in), until its port refuses or it \
            answers; not for the failures of `auth_failed` / `protocol_error` / `request_error`. \
            With TLS, a broker that accepts the connection and never answers the handshake is \
            this too (a frozen TLS broker), not `unreachable`. Between rounds, from the \
            continuous liveness check (zombie or unknown): no answer on its open connection past \
            its threshold (and past its own pause record: see `liveness_flapping`) while a peer \
            vouches for the watchdog's path, and a fresh TCP connection beside it was accepted \
            (\"accepted but silent\") or, after one was, timed out (\"its accept queue is \
            full\"). A peer vouches when it answers now, or answered after this silence passed \
            its threshold and within the last 10 s, so a peer's own GC pause does not turn a \
            frozen broker `unknown`; unknown when no peer has for longer (the watchdog's own \
            network)",
        RequestError = "request_error" => [Degraded]
            "it answers, but with a Kafka error for the whole request (Metadata's top-level error \
            code, other than not authorized): alive, so no zombie, and still wrong for its \
            clients",
        Restarting = "restarting" => [Down]
            "its port accepts again after it was down (within `restart_grace_secs`), and it has \
            not answered since: Kafka binds its port before it serves, so a starting broker is \
            never a zombie. The grace ends at its first answer after the restart, and this \
            verdict never renews it: a broker that wedges after it came back is a zombie at once",
        LivenessFlapping = "liveness_flapping" => [Degraded]
            "it keeps stalling: each broker has its own pause record (answers late by 250 ms and \
            4x its median answer, up to twice `liveness_floor_ms`, remembered 10 minutes), and 3 \
            stalls in the last 120 s, or one past its threshold in the last 30 s, make it \
            degraded while it answers, with the pauses as evidence (\"stalled 4 time(s) in the \
            last 120 s, up to 1.2 s, about every 20 s\"). While it is silent past its threshold \
            but within its longest remembered pause plus 0.5 s it is pausing again, degraded, not \
            a zombie; past that, a zombie. A broker with no record is a zombie at its threshold, \
            as fast as ever (the phi accrual idea: judge a silence by that broker's own history)",
        /// Degraded within moments of being down: a restart registering, not a zombie.
        FencedButServing = "fenced_but_serving" => [Zombie, Degraded]
            "it answers clients, but the controller fenced it / the others do not list it (see \
            [Registration](how-it-works.md#registration)); degraded when it was down moments ago \
            (a restart still registering); before Kafka 4.0 no answer reports fencing, and the \
            sentence says fenced or unregistered cannot be told apart",
        StaleMetadata = "stale_metadata" => [Zombie]
            "its Raft fetch of the metadata log keeps up (the quorum's leader had a fetch from it \
            within 3 s and it was caught up within 6 s) while its own answers miss leadership \
            changes the quorum committed: partitions whose newest leader epoch it does not have, \
            or topics its answer about every topic lacks (asked again before they count). It \
            receives the metadata log and does not apply it (a stopped metadata loader): never \
            fenced, it never learns of a change, so partitions moved onto it have no leader that \
            serves them, and a controlled shutdown that waits on it hangs. The detail names the \
            partitions whose leadership it missed, its own first. Without the quorum's word (no \
            DescribeQuorum, or its fetch lags: cut off from the controllers) the same staleness \
            stays `metadata_disagreement`",
        GroupCoordinatorStalled = "group_coordinator_stalled" => [Zombie]
            "its group coordinator left the probe's OffsetFetch unanswered twice in a row (a 1 s \
            deadline, probed every 500 ms) while the broker answered ApiVersions on another \
            connection within a quarter of that: the consumer groups hashed onto the \
            `__consumer_offsets` partitions it leads cannot commit offsets or rebalance, while \
            produce, fetch and the canary work (Kafka 4's coordinator threads stopped or wedged). \
            The detail names those partitions. A broker silent on both connections (frozen, a GC \
            pause) is not this: `no_answer` names it (see \
            [Coordinators](how-it-works.md#coordinators-the-groups-side-of-a-broker))",
        TxnCoordinatorStalled = "txn_coordinator_stalled" => [Zombie]
            "with `coordinators.transactions` on: the probe's transaction on a \
            `__transaction_state` partition the broker leads has not ended for \
            `txn_stall_grace_ms` (5 s; InitProducerId answers CONCURRENT_TRANSACTIONS: the commit \
            markers are not written), or its transaction coordinator left two probe rounds \
            unanswered while the broker answered ApiVersions. Every transactional producer hashed \
            onto those partitions cannot begin or end a transaction. The detail names the \
            partitions",
        TxnCoordinatorFailing = "txn_coordinator_failing" => [Zombie]
            "with `coordinators.transactions` on: a coordinator error for a `__transaction_state` \
            partition it leads for `coordinators.error_grace_secs` (60 s)",
        GroupCoordinatorFailing = "group_coordinator_failing" => [Zombie]
            "its group coordinator has answered COORDINATOR_LOAD_IN_PROGRESS, \
            COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR for a shard the cluster's metadata says \
            it leads for `coordinators.error_grace_secs` (60 s): a coordinator that loads for \
            seconds after a leadership change is normal, one that never comes up is not",
        StaleLeader = "stale_leader" => [Zombie]
            "it claims leadership of partitions a newer leader epoch gave to another broker",
        OutOfEveryIsr = "out_of_every_isr" => [Zombie, Degraded]
            "alive, replicates partitions, leads none, missing from every ISR: zombie once its log \
            end offsets have not grown for `catch_up_window_secs` (60 s); degraded while they \
            grow (catching up) or when they cannot be measured. A replica an ongoing reassignment \
            is adding is copying, not missing: it counts neither here nor in `out_of_some_isrs` \
            nor as under-replicated (Kafka's own count leaves it out too). So is a replica \
            copying under the operator's replication throttle (its topic's \
            `follower.replication.throttled.replicas` lists it, or \
            `leader.replication.throttled.replicas` lists its leader, as \
            `kafka-reassign-partitions --throttle` sets them) while its logs grow: Kafka \
            throttles a replica that falls behind even after it joined the ISR, so one drops out \
            of an ISR during a throttled move; once its logs stand still for \
            `catch_up_window_secs` it counts missing again. A reassignment can also complete \
            between the round's metadata and its listing of reassignments: the watchdog then \
            reads those topics again after the listing, and a replica back in the ISR (or moved \
            away) is judged by that newer read",
        ReassignmentStalled = "reassignment_stalled" => [Zombie]
            "an ongoing reassignment is adding it to partitions, its leaders are ahead of it, and \
            its log end offsets have not grown for `catch_up_window_secs`: the replica is not \
            being added, whatever the reassignment says (a dead fetcher on the broker partitions \
            move to)",
        OutOfSomeIsrs = "out_of_some_isrs" => [Degraded]
            "missing from some ISRs, and for at least one of them the evidence points at it rather \
            than at the leader (the detail counts those now under min ISR)",
        FollowersCannotReplicate = "followers_cannot_replicate" => [Degraded]
            "followers dropped out of the ISR of partitions it leads, and the evidence points at \
            this leader, not at them",
        MetadataDisagreement = "metadata_disagreement" => [Degraded]
            "its metadata names other leaders than the newest view: its cache is behind (and \
            `stale_metadata` does not say why)",
        CanaryWritesFail = "canary_writes_fail" => [Zombie, Degraded]
            "canary writes it received for the partitions it leads fail (zombie when all fail \
            while it answers requests); degraded when writes a stale client sent it for \
            partitions it no longer leads fail other than with NOT_LEADER",
        CanaryNotEnoughReplicas = "canary_not_enough_replicas" => [Degraded]
            "canary acks=all writes fail with NOT_ENOUGH_REPLICAS, or time out while the leader \
            still takes acks=1 writes, and the evidence points at it (the lagging follower, or \
            the leader)",
        Slow = "slow" => [Degraded]
            "Metadata latency above `latency_degraded_factor` x the median of its peers (and above \
            250 ms); or the median of its recent liveness answers (about 16 s of them) above \
            `latency_degraded_factor` x its peers' and above 50 ms. With hysteresis: once slow, \
            it stays slow until its median is under half of that line, so a starved broker is \
            slow for as long as it is starved, not every other round",
        LogDirFailed = "log_dir_failed" => [Degraded]
            "it answers DescribeLogDirs (asked every round, for no topic: a few bytes per \
            directory) with KAFKA_STORAGE_ERROR for a directory: Kafka took it offline (a failed \
            or full disk; with two or more directories the broker stays up) and serves none of \
            the partitions there until the disk is replaced and the broker restarted. The detail \
            names the directory and the partitions that name it an offline replica; those \
            partitions' own incidents (under-replicated, offline) follow",
        /// The answering controller's words on a broker that is not healthy: it keeps the
        /// state the broker's own evidence gave it.
        ZookeeperController = "zookeeper_controller" => []
            "ZooKeeper mode only (no broker announces DescribeQuorum): the broker is not healthy \
            and the answering brokers' Metadata names it the cluster's controller. Added to its \
            other evidence at its own state, so its page says why nothing else heals: no leader \
            election, ISR change or topic creation until ZooKeeper expires its session and \
            another broker takes over. In KRaft, Metadata's controller id names a random broker \
            and is not read",
        LogDirFilling = "log_dir_filling" => [Degraded]
            "a directory (Kafka 3.3+, DescribeLogDirs v4 total and usable bytes) below 5 % free \
            (`verdict.log_dir_min_free_ratio`), or full within 6 h \
            (`verdict.log_dir_full_within_secs`, 0: no forecast) at its pace over the last 30 min \
            (10 min of history at least: a burst of minutes on a shared disk says nothing of \
            hours): a warning before Kafka takes it offline",
        // Host mode: the broker's process as /proc shows it.
        ProcessStopped = "process_stopped" => [Zombie]
            "host mode: its process is stopped by a signal (SIGSTOP or SIGTSTP): the kernel still \
            completes TCP handshakes for it, which is why a port check calls it alive",
        /// Degraded when something answers at its address all the same: the lookup is more
        /// likely wrong than Kafka.
        ProcessGone = "process_gone" => [Down, Degraded]
            "host mode: no process is found for it (systemd unit, pid file or command line); \
            degraded when something answers at its address all the same (check the `host.brokers` \
            process setting)",
        ProcessExited = "process_exited" => [Down]
            "host mode: its process has exited and waits for its parent to reap it",
        ProcessAliveNoAnswer = "process_alive_no_answer" => [Zombie]
            "host mode: its process runs and its port accepts, and it answers no request in time",
        PortNotListening = "port_not_listening" => [Degraded]
            "host mode: its process runs, but nothing listens on a configured port, or another \
            process holds it",
        LogDirLowSpace = "log_dir_low_space" => [Degraded]
            "host mode: a configured log directory has less free space than \
            `host.log_dir_min_free_ratio` (5 % by default)",
        LogDirUnreadable = "log_dir_unreadable" => [Degraded]
            "host mode: a configured log directory cannot be read",
    }
}

rule_table! {
    /// A controller verdict's rules.
    ControllerRule of ControllerState {
        PortClosed = "controller_port_closed" => [Down]
            "asked directly, it refuses connections (or its name does not resolve). A controller \
            restart is routine while the others keep the quorum: paged only if it is not back \
            within `restart_grace_secs`; the quorum's problem pages at once when the others \
            cannot hold it",
        Unreachable = "controller_unreachable" => [Down]
            "asked directly, the TCP connect times out and never was accepted in this failure \
            (same hold)",
        NoAnswer = "controller_no_answer" => [Zombie]
            "asked directly, it accepts the connection and answers nothing within the bound (a \
            frozen JVM), from the first look that failed; kept while connects then time out (its \
            accept queue full)",
        Wedged = "controller_wedged" => [Zombie]
            "it leads the quorum and its high watermark has stood still for 2 s (four no-op \
            intervals) while a majority of the voters is caught up: its event handler applies \
            nothing while its Raft threads keep the leadership, so Kafka never elects another",
        NotFetching = "controller_not_fetching" => [Lagging]
            "a follower voter the leader has had no fetch from for 3 s",
        Behind = "controller_behind" => [Lagging]
            "a follower voter not caught up with the leader for 6 s",
        NeverReached = "controller_never_reached" => [Unknown]
            "`controllers:` is configured and not one of them has accepted a connection since \
            the watchdog started (a network policy: Strimzi lets only the cluster's own pods \
            reach the controller port): the controllers are not watched directly, the quorum \
            is judged through the brokers, and nobody is paged for them. Once any controller \
            has been reached, one that cannot be is `controller_unreachable` or \
            `controller_port_closed` again",
        /// The watchdog's own sickness held out of a controller's verdict (issue 38 item 4).
        WatchdogUnwell = "controller_watchdog_unwell" => [Unknown]
            "asked directly, it did not answer or could not be connected to while the watchdog \
            itself was unwell (paused, starved, its clocks jumping, its packets lost: \
            `kafka_watchdog_self_degraded`), or within 10 s after: that says nothing of the \
            controller, which is `unknown` meanwhile and paged to nobody; a controller failing \
            since before the watchdog fell ill stays as it was. The quorum's `no_leader` is held \
            the same way",
        NotAsked = "controller_not_asked" => [Unknown]
            "asked directly, its answer cannot be read or the watchdog is refused",
        NotDescribed = "controller_not_described" => [Unknown]
            "not asked directly, and no leader describes it",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The state column of a rule: its states' labels, or the words for a rule that keeps
    /// the state the others decided.
    fn states_in_words(labels: Vec<&str>, own: &str) -> String {
        if labels.is_empty() {
            return own.to_string();
        }
        labels.join(" / ")
    }

    /// One table row per rule: name, states, meaning.
    fn rows(out: &mut String, rows: impl Iterator<Item = (&'static str, String, &'static str)>) {
        out.push_str("| rule | state | fires when |\n|---|---|---|\n");
        for (name, states, meaning) in rows {
            out.push_str(&format!(
                "| `{name}` | {states} | {} |\n",
                meaning.replace('|', "\\|")
            ));
        }
    }

    /// docs/rules.md: every rule of both tables with its states and meaning.
    fn reference() -> String {
        let mut out = String::from(
            "# Verdict rules\n\n\
             <!-- Generated from the rule table (src/judge/rule.rs): \
             `KW_DOCS_WRITE=1 cargo test --lib judge::rule` rewrites it; do not edit. -->\n\n\
             Every rule a verdict can cite, most severe first. A rule's name is a contract: \
             it is on `/status`, in webhooks' evidence and `rules`, and in the log, and alert \
             routes may rely on it. How the watchdog gathers the evidence, and when it holds \
             rules back (a control plane that is out, a restart): \
             [how-it-works.md](how-it-works.md).\n\n\
             ## Brokers\n\n\
             A broker's verdict is `healthy`, `degraded`, `zombie`, `down`, or `unknown` when \
             the watchdog cannot see the cluster. A broker that does not answer, that no other \
             broker lists (unregistered) and that no partition names as a replica has left \
             the cluster: it gets no verdict, and a decommissioned broker is forgotten at \
             once, not `down`.\n\n",
        );
        rows(
            &mut out,
            Rule::ALL.iter().map(|r| {
                let labels = r.states().iter().map(|s| s.as_label()).collect();
                (
                    r.name(),
                    states_in_words(labels, "the broker's own"),
                    r.meaning(),
                )
            }),
        );
        out.push_str(
            "\n## Controllers\n\n\
             Each KRaft controller the watchdog knows of (configured, learned, or a voter the \
             quorum's leader describes) gets a verdict: `healthy`, `lagging`, `zombie`, \
             `down`, or `unknown` when nothing describes it. The quorum's own problems are in \
             [how-it-works.md](how-it-works.md#the-control-plane-controllers-and-the-quorum).\n\n",
        );
        rows(
            &mut out,
            ControllerRule::ALL.iter().map(|r| {
                let labels = r.states().iter().map(|s| s.as_label()).collect();
                (
                    r.name(),
                    states_in_words(labels, "the controller's own"),
                    r.meaning(),
                )
            }),
        );
        out
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
        assert_eq!(Rule::ALL.len(), 38);
        assert_eq!(ControllerRule::ALL.len(), 10);
    }

    #[test]
    fn the_committed_rules_reference_is_current() {
        crate::model::generated::assert_current(
            "docs/rules.md",
            &reference(),
            "KW_DOCS_WRITE=1 cargo test --lib judge::rule",
            &[],
        );
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
