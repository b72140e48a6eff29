//! What brokers and the OAuth endpoint answer: every response body the client decodes, and
//! DescribeQuorum and DescribeLogDirs answers followed through several looks into the
//! verdicts, `/status` and `/metrics`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::{now, Input};
use crate::judge::report::{newest_view, ClusterReport, Evaluator};
use crate::judge::verdict::VerdictSettings;
use crate::model::round::{
    BrokerEndpoint, BrokerProbe, FailureKind, LogDirState, MetadataView, ProbeFailure,
    QuorumAnswer, QuorumObservation, RoundObservation,
};
use crate::observe::quorum::{QuorumProber, QuorumSettings};
use crate::observe::wire::{self, WireOptions};
use crate::serve::snapshot::Publisher;

/// Looks per input: enough for the history that forecasts and stalls need.
const LOOKS: usize = 8;

/// `[api key: i16][version: i16][body]`, big-endian: any answer the client decodes.
pub fn wire_decode(data: &[u8]) {
    if data.len() < 4 {
        return;
    }
    let api_key = i16::from_be_bytes([data[0], data[1]]);
    let version = i16::from_be_bytes([data[2], data[3]]);
    let _ = wire::decode_response_for_fuzzing(api_key, version, &data[4..]);
}

fn failure(kind: FailureKind, detail: String) -> ProbeFailure {
    ProbeFailure {
        kind,
        detail,
        after: Duration::from_millis(3),
    }
}

/// A refused body is the broker's protocol error; an answer's error code is a Kafka error.
fn answered<T>(decoded: Result<Result<T, i16>, String>) -> Result<T, ProbeFailure> {
    match decoded {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(code)) => Err(failure(FailureKind::KafkaError, format!("error {code}"))),
        Err(e) => Err(failure(FailureKind::Protocol, e)),
    }
}

/// `[version % 3]`, then looks: `[ms since the last look: u16]` and, for each of three
/// controllers and a broker, `[tag]` (even: no answer in time; odd: a chunk, the answer's
/// body), and for the broker `[tag]` (odd: the applied metadata offset, a u16). Each look
/// is folded as the quorum prober folds one and the round with it judged; the last is
/// rendered.
pub fn describe_quorum(data: &[u8]) {
    let _ = quorum_looks(data);
}

/// `/status` after the last look of `describe_quorum`'s input.
fn quorum_looks(data: &[u8]) -> Option<String> {
    let mut last = None;
    let mut input = Input::new(data);
    let version = i16::from(input.byte() % 3);
    let mut prober = QuorumProber::new(QuorumSettings {
        cluster: "fuzz".into(),
        controllers: (1..=3)
            .map(|i| (None, format!("controller-{i}:9093")))
            .collect(),
        wire: WireOptions::default(),
    });
    let mut evaluator = one_broker_evaluator();
    let mut at = now();
    for _ in 0..LOOKS {
        if input.is_empty() {
            break;
        }
        at += Duration::from_millis(u64::from(input.u16()));
        let ask = |input: &mut Input| -> Result<QuorumAnswer, ProbeFailure> {
            if input.byte() % 2 == 0 {
                return Err(failure(FailureKind::Timeout, "no answer".into()));
            }
            answered(wire::describe_quorum_for_fuzzing(version, input.chunk()))
        };
        let controllers = (0..3).map(|_| ask(&mut input)).collect();
        let broker = ask(&mut input);
        let applied = (input.byte() % 2 == 1).then(|| i64::from(input.u16()));
        let look = prober.fold_answers(at, controllers, vec![(broker, applied)]);
        last = Some(judge(&mut evaluator, round(at, None, look)));
    }
    last.map(render)
}

/// `[version % 5]`, then looks: `[seconds since the last look: u16]` and a chunk, the
/// answer's body. Each answer is the broker's log directories in a round judged (failed
/// directories, the free-space forecast over the looks); the last is rendered.
pub fn describe_log_dirs(data: &[u8]) {
    let _ = log_dir_looks(data);
}

/// `/status` after the last look of `describe_log_dirs`'s input.
fn log_dir_looks(data: &[u8]) -> Option<String> {
    let mut last = None;
    let mut input = Input::new(data);
    let version = i16::from(input.byte() % 5);
    let mut evaluator = one_broker_evaluator();
    let mut at = now();
    for _ in 0..LOOKS {
        if input.is_empty() {
            break;
        }
        at += Duration::from_secs(u64::from(input.u16()));
        let dirs = answered(wire::describe_log_dirs_for_fuzzing(version, input.chunk()));
        last = Some(judge(&mut evaluator, round(at, Some(dirs), None)));
    }
    last.map(render)
}

/// `[tag]` (odd: the endpoint answered 2xx), then the body: a token answer, an OAuth error
/// answer, or a broker's SASL error challenge.
pub fn oauth_token(data: &[u8]) {
    let mut input = Input::new(data);
    let success = input.byte() % 2 == 1;
    let _ = wire::oauth_answer_for_fuzzing(success, input.rest());
}

fn one_broker_evaluator() -> Evaluator {
    Evaluator::new("fuzz", VerdictSettings::default(), Arc::new(|_: &str| true))
}

/// A round in which broker 1, the whole cluster, answered with these log directories and
/// the quorum looked like this.
fn round(
    at: SystemTime,
    log_dirs: Option<Result<Vec<LogDirState>, ProbeFailure>>,
    quorum: Option<QuorumObservation>,
) -> RoundObservation {
    let endpoint = BrokerEndpoint {
        id: 1,
        host: "broker-1".into(),
        port: 9092,
        rack: None,
    };
    let view = MetadataView {
        cluster_id: Some("fuzz".into()),
        controller_id: Some(1),
        brokers: vec![endpoint.clone()],
        has_leader_epochs: true,
        has_offline_replicas: true,
        version: 12,
        all_topics: true,
        ..MetadataView::default()
    };
    let probe = BrokerProbe {
        endpoint,
        connect: Ok(Duration::from_millis(1)),
        api_versions: Some(Ok(Duration::from_millis(1))),
        metadata: Some(Ok((view, Duration::from_millis(2)))),
        description: None,
        certificate: None,
        log_dirs,
        speaks_quorum: Some(true),
    };
    RoundObservation {
        cluster: "fuzz".into(),
        started_at: at,
        duration: Duration::from_millis(5),
        probes: BTreeMap::from([(1, probe)]),
        bootstrap_failures: Vec::new(),
        min_isr: BTreeMap::new(),
        unclean_allowed: Default::default(),
        eligible_leaders: Default::default(),
        host: BTreeMap::new(),
        followers: BTreeMap::new(),
        liveness: BTreeMap::new(),
        quorum: quorum.map(Arc::new),
        coordinators: None,
        brokers_unwatched: 0,
    }
}

/// The round through the verdicts, as the round loop evaluates it.
fn judge(evaluator: &mut Evaluator, obs: RoundObservation) -> ClusterReport {
    let at = obs.started_at;
    let view = Arc::new(newest_view(&obs));
    evaluator.evaluate_merged(obs, view, None, at)
}

/// `/metrics` and `/status` as the server renders them after the report (only the last
/// look's: rendering costs more than judging, and the last holds what the looks before
/// left); the status page.
fn render(report: ClusterReport) -> String {
    let published = Publisher::new("fuzz", vec!["fuzz".into()]);
    published.publish(Arc::new(report));
    let snapshot = published.current();
    let extras = published.extras(&snapshot);
    let _ = crate::serve::metrics::render(snapshot.reports(), &extras);
    crate::serve::status::render(&published.instance_id, snapshot.reports(), &extras)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed(target: &str, name: &str) -> Vec<u8> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("fuzz/corpus")
            .join(target)
            .join(name);
        std::fs::read(path).unwrap()
    }

    /// The seeds reach the verdicts: the answers are decoded, folded across looks and
    /// judged, not refused on the way.
    #[test]
    fn seeds_reach_the_verdicts() {
        let status = log_dir_looks(&seed("describe_log_dirs", "one-failed-v4")).unwrap();
        assert!(status.contains("log_dir_failed"), "{status}");
        let status = quorum_looks(&seed("describe_quorum", "wedged-leader-v2")).unwrap();
        assert!(status.contains("controller_wedged"), "{status}");
    }
}
