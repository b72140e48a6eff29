//! The lab's state file: what was started, with which pids, and which faults are applied.
//! It lets separate `kafka-lab` invocations and test processes share one cluster.

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::LabError;
use crate::topology::{KafkaVersion, NodeSpec, Security};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "fault")]
pub enum Fault {
    /// The node cannot fetch from any leader (its replica fetchers are cut).
    CutReplication,
    /// The node is cut off from the quorum (controller or ZooKeeper) and, when `full`, from
    /// the other brokers too; clients still reach it.
    Isolate { full: bool },
    /// The node is limited to this percentage of one CPU.
    Slow { percent: u32 },
    /// Its request handler and network threads are stopped by the tracer process `tracer`;
    /// the rest of the JVM (heartbeats included) runs.
    Stall { tracer: u32 },
    /// Its replica fetcher threads are stopped by the tracer process `tracer`.
    StallFetchers { tracer: u32 },
    /// A controller's event handler thread is stopped by the tracer process `tracer`; its
    /// Raft threads run.
    StallController { tracer: u32 },
    /// A broker's metadata loader/publisher thread is stopped by the tracer process
    /// `tracer`; its heartbeat and Raft fetch run.
    StallMetadata { tracer: u32 },
    /// A broker's group coordinator threads are stopped by the tracer process `tracer`; it
    /// serves everything but its groups.
    StallGroupCoordinator { tracer: u32 },
    /// A broker's transaction coordinator threads (marker sender, transaction log
    /// scheduler) are stopped by the tracer process `tracer`.
    StallTxnCoordinator { tracer: u32 },
    /// A broker's certificate was issued again, valid for `days` days from then (not the
    /// lab's validity), or signed by the lab's second CA (`second_ca`: a CA rotation); the
    /// broker presents it once restarted. It outlives restarts; `heal` issues one of the
    /// lab's validity, signed by the lab CA, and restarts the broker.
    Cert {
        days: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        second_ca: bool,
    },
    /// A broker's second (small, tmpfs) log directory is full: a filler file takes its last
    /// byte, and Kafka took the directory offline. It outlives restarts; `heal` removes the
    /// filler and restarts the broker, the only way Kafka brings a failed directory back.
    /// Until then the broker cannot start again: Kafka 4.4 exits recovering its logs there.
    LogDirFull,
}

impl Fault {
    pub fn label(&self) -> String {
        match self {
            Fault::CutReplication => "cut-replication".into(),
            Fault::Isolate { full: true } => "isolated".into(),
            Fault::Isolate { full: false } => "isolated-from-quorum".into(),
            Fault::Slow { percent } => format!("slow({percent}% cpu)"),
            Fault::Stall { tracer } => format!("stalled(request threads, tracer {tracer})"),
            Fault::StallFetchers { tracer } => {
                format!("stalled(replica fetchers, tracer {tracer})")
            }
            Fault::StallController { tracer } => {
                format!("stalled(controller event handler, tracer {tracer})")
            }
            Fault::StallMetadata { tracer } => {
                format!("stalled(metadata loader, tracer {tracer})")
            }
            Fault::StallGroupCoordinator { tracer } => {
                format!("stalled(group coordinator, tracer {tracer})")
            }
            Fault::StallTxnCoordinator { tracer } => {
                format!("stalled(transaction coordinator, tracer {tracer})")
            }
            Fault::Cert { days, second_ca } => format!(
                "cert(valid {days} day{}{})",
                if *days == 1 { "" } else { "s" },
                if *second_ca { ", second CA" } else { "" }
            ),
            Fault::LogDirFull => "log-dir-full(data2)".into(),
        }
    }

    /// Whether the fault is on disk rather than in the process or the network: it outlives
    /// the node's restarts and only `heal` removes it.
    pub fn persists(&self) -> bool {
        matches!(self, Fault::Cert { .. } | Fault::LogDirFull)
    }

    /// The process that keeps this fault in place, if one does.
    pub fn tracer(&self) -> Option<u32> {
        match self {
            Fault::Stall { tracer }
            | Fault::StallFetchers { tracer }
            | Fault::StallController { tracer }
            | Fault::StallMetadata { tracer }
            | Fault::StallGroupCoordinator { tracer }
            | Fault::StallTxnCoordinator { tracer } => Some(*tracer),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeRecord {
    #[serde(flatten)]
    pub spec: NodeSpec,
    pub pid: Option<u32>,
    pub faults: Vec<Fault>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub version: KafkaVersion,
    pub security: Security,
    pub cluster_id: String,
    pub nodes: Vec<NodeRecord>,
    /// How long the brokers' certificates are valid when issued (SASL_SSL labs).
    #[serde(default = "default_cert_days")]
    pub cert_days: u32,
    /// Log directories per broker: 1, or 2 (the second a small tmpfs, `logdirs`). State
    /// files written before the option have one.
    #[serde(default = "one")]
    pub log_dirs: u32,
}

fn one() -> u32 {
    1
}

fn default_cert_days() -> u32 {
    crate::secrets::DEFAULT_CERT_DAYS
}

impl LabState {
    pub fn path(dir: &Path) -> PathBuf {
        dir.join("state.json")
    }

    pub fn load(dir: &Path) -> Result<Option<LabState>, LabError> {
        let path = Self::path(dir);
        match fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| LabError::Invalid(format!("{}: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(LabError::io(&path, e)),
        }
    }

    pub fn save(&self, dir: &Path) -> Result<(), LabError> {
        let path = Self::path(dir);
        let tmp = dir.join("state.json.tmp");
        let text = serde_json::to_string_pretty(self).expect("lab state serializes");
        fs::write(&tmp, text).map_err(|e| LabError::io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| LabError::io(&path, e))
    }

    pub fn node(&self, id: i32) -> Result<&NodeRecord, LabError> {
        self.nodes
            .iter()
            .find(|n| n.spec.id == id)
            .ok_or_else(|| LabError::UnknownNode(id, self.node_list()))
    }

    pub fn node_mut(&mut self, id: i32) -> Result<&mut NodeRecord, LabError> {
        let list = self.node_list();
        self.nodes
            .iter_mut()
            .find(|n| n.spec.id == id)
            .ok_or(LabError::UnknownNode(id, list))
    }

    fn node_list(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.spec.id.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state file written before certificates had a validity of their own (or by an older
    /// `kafka-lab`) still opens, with the validity every lab had then.
    #[test]
    fn a_state_file_from_before_cert_days_and_log_dirs_opens_with_the_defaults() {
        let old = r#"{"version":"4.4","security":"sasl_ssl","cluster_id":"x","nodes":[
            {"id":2,"role":"broker","host":"127.0.0.12","port":9092,"pid":null,"faults":[]}]}"#;
        let state: LabState = serde_json::from_str(old).unwrap();
        assert_eq!(state.cert_days, crate::secrets::DEFAULT_CERT_DAYS);
        assert_eq!(state.log_dirs, 1);
        let back: LabState = serde_json::from_str(&serde_json::to_string(&state).unwrap()).unwrap();
        assert_eq!(back.cert_days, state.cert_days);
    }

    #[test]
    fn a_certificate_outlives_restarts_and_process_faults_do_not() {
        let cert = Fault::Cert {
            days: 1,
            second_ca: false,
        };
        assert!(cert.persists());
        assert_eq!(cert.label(), "cert(valid 1 day)");
        let zero = Fault::Cert {
            days: 0,
            second_ca: false,
        };
        assert_eq!(zero.label(), "cert(valid 0 days)");
        assert_eq!(
            serde_json::to_string(&cert).unwrap(),
            r#"{"fault":"cert","days":1}"#
        );
        // Written by a kafka-lab before the second CA: read the same.
        let before: Fault = serde_json::from_str(r#"{"fault":"cert","days":1}"#).unwrap();
        assert_eq!(before, cert);
        let rotated = Fault::Cert {
            days: 365,
            second_ca: true,
        };
        assert_eq!(rotated.label(), "cert(valid 365 days, second CA)");
        let back: Fault = serde_json::from_str(&serde_json::to_string(&rotated).unwrap()).unwrap();
        assert_eq!(back, rotated);
        assert!(Fault::LogDirFull.persists());
        assert_eq!(
            serde_json::to_string(&Fault::LogDirFull).unwrap(),
            r#"{"fault":"log_dir_full"}"#
        );
        assert!(!Fault::Stall { tracer: 1 }.persists());
        assert!(!Fault::CutReplication.persists());
    }
}
