//! Which of the watchdog's signals a broker's protocol versions give it. Older brokers answer
//! older versions (no DescribeCluster before Kafka 2.8, no fenced brokers before 4.0, no
//! DescribeTopicPartitions before 3.7 and never in ZooKeeper mode): what a version lacks, the
//! watchdog cannot see, and says so instead of guessing. The table of docs/compatibility.md is
//! rendered from these rows as negotiated with each lab release (`tests/matrix.rs` writes
//! the columns, `tests/docs.rs` the table).

use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::VersionRange;

use super::convert::{
    DESCRIBE_CLUSTER_FENCED, METADATA_LEADER_EPOCH, METADATA_OFFLINE_REPLICAS, METADATA_TOPIC_ID,
};
use super::log_dirs::SPACE as LOG_DIR_SPACE;
use super::partitions::{ELECT_WITH_TYPE, LIST_OFFSETS_SINGLE};
use super::produce::PRODUCE_BY_NAME;
use super::quorum::QUORUM_FETCH_TIMES;
use super::versions::SupportedVersions;

/// One signal: the API and the versions of it that carry the signal.
struct Def {
    key: &'static str,
    what: &'static str,
    used_by: &'static str,
    api: ApiKey,
    within: VersionRange,
}

const fn from(min: i16) -> VersionRange {
    VersionRange { min, max: i16::MAX }
}

const ANY: VersionRange = from(0);

const DEFS: &[Def] = &[
    Def {
        key: "metadata",
        what: "Metadata: leaders, replicas, ISR",
        used_by: "every probe; partition states; no_answer, out_of_every_isr",
        api: ApiKey::Metadata,
        within: ANY,
    },
    Def {
        key: "offline_replicas",
        what: "offline replicas (Metadata v5+)",
        used_by: "offline-partition suspects",
        api: ApiKey::Metadata,
        within: from(METADATA_OFFLINE_REPLICAS),
    },
    Def {
        key: "leader_epochs",
        what: "leader epochs (Metadata v7+)",
        used_by: "stale_leader, split_brain",
        api: ApiKey::Metadata,
        within: from(METADATA_LEADER_EPOCH),
    },
    Def {
        key: "topic_ids",
        what: "topic ids (Metadata v10+)",
        used_by: "a recreated topic is not a stale epoch",
        api: ApiKey::Metadata,
        within: from(METADATA_TOPIC_ID),
    },
    Def {
        key: "describe_cluster",
        what: "registered brokers (DescribeCluster, Kafka 2.8+)",
        used_by: "registration votes (else Metadata broker lists)",
        api: ApiKey::DescribeCluster,
        within: ANY,
    },
    Def {
        key: "fenced_brokers",
        what: "fenced brokers (DescribeCluster v2, Kafka 4.0+)",
        used_by: "fenced_but_serving tells fenced from unregistered",
        api: ApiKey::DescribeCluster,
        within: from(DESCRIBE_CLUSTER_FENCED),
    },
    Def {
        key: "eligible_leaders",
        what: "eligible leader replicas (DescribeTopicPartitions, KRaft 3.7+)",
        used_by: "ELR of offline partitions",
        api: ApiKey::DescribeTopicPartitions,
        within: ANY,
    },
    Def {
        key: "replica_offsets",
        what: "a replica's log end offset (ListOffsets v1+)",
        used_by: "catch-up of followers out of ISRs",
        api: ApiKey::ListOffsets,
        within: LIST_OFFSETS_SINGLE,
    },
    Def {
        key: "reassignments",
        what: "ongoing reassignments (ListPartitionReassignments)",
        used_by: "catch-up vs reassignment",
        api: ApiKey::ListPartitionReassignments,
        within: ANY,
    },
    Def {
        key: "topic_configs",
        what: "topic configs (DescribeConfigs)",
        used_by: "min ISR, unclean election allowed, replication throttles",
        api: ApiKey::DescribeConfigs,
        within: ANY,
    },
    Def {
        key: "produce",
        what: "writes to one broker (Produce v3-12)",
        used_by: "canary, acks1_loss, canary_writes_fail",
        api: ApiKey::Produce,
        within: PRODUCE_BY_NAME,
    },
    Def {
        key: "quorum",
        what: "the KRaft quorum (DescribeQuorum, forwarded by brokers)",
        used_by: "controller and quorum verdicts, stale_metadata",
        api: ApiKey::DescribeQuorum,
        within: ANY,
    },
    Def {
        key: "quorum_fetch_times",
        what: "voters' and observers' fetch times (DescribeQuorum v1+)",
        used_by: "lagging controllers; stale_metadata's Raft fetch evidence",
        api: ApiKey::DescribeQuorum,
        within: from(QUORUM_FETCH_TIMES),
    },
    Def {
        key: "group_coordinators",
        what: "group coordinators (OffsetFetch; one request for every shard from v8)",
        used_by: "group_coordinator_stalled, group_coordinator_failing",
        api: ApiKey::OffsetFetch,
        within: ANY,
    },
    Def {
        key: "log_dirs",
        what: "log directories in error (DescribeLogDirs)",
        used_by: "log_dir_failed",
        api: ApiKey::DescribeLogDirs,
        within: ANY,
    },
    Def {
        key: "log_dir_space",
        what: "log directories' free space (DescribeLogDirs v4+, Kafka 3.3+)",
        used_by: "log_dir_filling; broker_log_dir_usable_bytes",
        api: ApiKey::DescribeLogDirs,
        within: from(LOG_DIR_SPACE),
    },
    Def {
        key: "elect_leaders",
        what: "leader elections (ElectLeaders v1+)",
        used_by: "remediation",
        api: ApiKey::ElectLeaders,
        within: ELECT_WITH_TYPE,
    },
];

/// Whether one signal is available from a broker, and through which version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Signal {
    pub key: &'static str,
    pub what: &'static str,
    pub used_by: &'static str,
    /// The version the watchdog uses for the signal when available, else the one it would
    /// negotiate for the signal's API; `None` when the broker does not announce the API.
    pub negotiated: Option<i16>,
    pub available: bool,
}

impl Signal {
    /// The table cell: "v12", or "no (v1)" / "no (absent)".
    pub fn cell(&self) -> String {
        match (self.available, self.negotiated) {
            (true, Some(v)) => format!("v{v}"),
            (_, Some(v)) => format!("no (v{v})"),
            (_, None) => "no (absent)".into(),
        }
    }

    /// What the watchdog cannot see on this broker, as a sentence; `None` when it can.
    pub fn unseen(&self) -> Option<String> {
        (!self.available).then(|| format!("cannot see {}: used by {}", self.what, self.used_by))
    }
}

/// Every signal, in the table's order, as `versions` allow it.
pub fn signals(versions: &SupportedVersions) -> Vec<Signal> {
    DEFS.iter()
        .map(|d| {
            let used = versions.pick_within(d.api, d.within);
            Signal {
                key: d.key,
                what: d.what,
                used_by: d.used_by,
                negotiated: used.or_else(|| versions.negotiated(d.api)),
                available: used.is_some(),
            }
        })
        .collect()
}

/// One release's column as committed in `docs/compat/<name>.tsv`: a header line with the
/// release, then `key<TAB>cell` per signal.
pub fn column_text(release: &str, signals: &[Signal]) -> String {
    let mut out = format!("release\t{release}\n");
    for s in signals {
        out.push_str(&format!("{}\t{}\n", s.key, s.cell()));
    }
    out
}

/// The Markdown table of docs/compatibility.md from committed columns, in the given order. A column
/// that lacks a signal (written before the signal existed) shows `?`.
pub fn markdown_table(columns: &[String]) -> String {
    let parsed: Vec<(String, std::collections::BTreeMap<String, String>)> = columns
        .iter()
        .map(|c| {
            let mut release = String::from("?");
            let mut cells = std::collections::BTreeMap::new();
            for line in c.lines() {
                if let Some((k, v)) = line.split_once('\t') {
                    if k == "release" {
                        release = v.to_string();
                    } else {
                        cells.insert(k.to_string(), v.to_string());
                    }
                }
            }
            (release, cells)
        })
        .collect();
    let mut out = String::from("| signal | used by |");
    for (release, _) in &parsed {
        out.push_str(&format!(" {release} |"));
    }
    out.push_str("\n| --- | --- |");
    for _ in &parsed {
        out.push_str(" --- |");
    }
    out.push('\n');
    for d in DEFS {
        out.push_str(&format!("| {} | {} |", d.what, d.used_by));
        for (_, cells) in &parsed {
            let cell = cells.get(d.key).map(String::as_str).unwrap_or("?");
            out.push_str(&format!(" {cell} |"));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::ApiVersionsResponse;

    fn broker(ranges: &[(ApiKey, i16, i16)]) -> SupportedVersions {
        let response = ApiVersionsResponse::default().with_api_keys(
            ranges
                .iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k as i16)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        );
        SupportedVersions::from_response(&response, 3)
    }

    fn get<'a>(s: &'a [Signal], key: &str) -> &'a Signal {
        s.iter().find(|s| s.key == key).unwrap()
    }

    #[test]
    fn a_kafka_3_broker_gives_no_fenced_brokers_and_says_so() {
        // Kafka 3.6 in ZooKeeper mode: DescribeCluster v0-1, no DescribeTopicPartitions.
        let s = signals(&broker(&[
            (ApiKey::Metadata, 0, 12),
            (ApiKey::DescribeCluster, 0, 1),
        ]));
        let fenced = get(&s, "fenced_brokers");
        assert!(!fenced.available);
        assert_eq!(fenced.cell(), "no (v1)");
        assert!(fenced
            .unseen()
            .unwrap()
            .contains("fenced brokers (DescribeCluster v2, Kafka 4.0+)"));
        assert_eq!(get(&s, "describe_cluster").cell(), "v1");
        assert_eq!(get(&s, "eligible_leaders").cell(), "no (absent)");
        assert_eq!(get(&s, "leader_epochs").cell(), "v12");
        assert_eq!(get(&s, "leader_epochs").unseen(), None);
    }

    #[test]
    fn a_kafka_4_broker_gives_fenced_brokers_and_old_metadata_no_epochs() {
        let s = signals(&broker(&[
            (ApiKey::Metadata, 0, 13),
            (ApiKey::DescribeCluster, 0, 2),
        ]));
        assert!(get(&s, "fenced_brokers").available);
        let produce = signals(&broker(&[(ApiKey::Produce, 3, 13)]));
        assert_eq!(
            get(&produce, "produce").cell(),
            "v12",
            "v13 names topics by id only"
        );
        let old = signals(&broker(&[(ApiKey::Metadata, 0, 6)]));
        assert!(get(&old, "offline_replicas").available);
        assert_eq!(get(&old, "leader_epochs").cell(), "no (v6)");
        assert_eq!(get(&old, "describe_cluster").cell(), "no (absent)");
    }

    #[test]
    fn the_table_has_a_column_per_release_and_marks_missing_rows() {
        let a = column_text(
            "2.8.2 (ZooKeeper)",
            &signals(&broker(&[(ApiKey::Metadata, 0, 11)])),
        );
        let t = markdown_table(&[a, "release\t9.9\n".into()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "| signal | used by | 2.8.2 (ZooKeeper) | 9.9 |");
        assert_eq!(lines.len(), 2 + DEFS.len());
        assert!(
            lines[4].starts_with("| leader epochs (Metadata v7+) |"),
            "{t}"
        );
        assert!(lines[4].ends_with("| v11 | ? |"), "{t}");
    }
}
