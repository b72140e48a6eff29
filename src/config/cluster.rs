//! One cluster: its own keys, the `defaults:` block merged in key by key, the built-in
//! defaults under both, and the rules that tie several keys together.
//!
//! A value that was written but is wrong is kept apart from a value that was not written
//! (`Slot::Bad` against `Slot::Unset`), so a bad value never silently falls back to a
//! default and then trips a second, misleading problem in a cross-key check.

use std::collections::BTreeMap;
use std::time::Duration;

use regex::Regex;

use super::build::Ctx;
use super::checks;
use super::read::{
    bool_slot, float, int, int_slot, list, pick, text, text_node, Fields, Origin, Report, Resolved,
    Set, Slot,
};
use super::schema::{self as s, IntSpec};
use super::security::security;
use super::types::*;
use super::yaml::{shorten, Entry, Kind, Node, Pos};

type Patterns = Vec<(String, Regex)>;

/// The settings a cluster shares with `defaults:`.
pub(crate) struct Layer {
    round_interval: Slot<u64>,
    connect_timeout: Slot<u64>,
    request_timeout: Slot<u64>,
    topic_config_refresh: Slot<u64>,
    forget_broker_after: Slot<u64>,
    full_metadata_budget: Slot<u64>,
    include: Slot<Patterns>,
    exclude: Slot<Patterns>,
    canary: CanaryLayer,
    verdict: VerdictLayer,
    librdkafka: BTreeMap<String, String>,
}

struct CanaryLayer {
    enabled: Slot<bool>,
    topic: Slot<String>,
    manage_topic: Slot<bool>,
    replication_factor: Slot<Option<u16>>,
    min_insync_replicas: Slot<Option<u16>>,
    produce_timeout: Slot<u64>,
    interval: Slot<u64>,
    lost_after: Slot<u64>,
    acks1_probe: Slot<bool>,
    reassign_stable: Slot<u64>,
    reassign_min_interval: Slot<u64>,
    elect_preferred_leaders: Slot<bool>,
}

struct VerdictLayer {
    open_after: Slot<u64>,
    resolve_after: Slot<u64>,
    open_after_secs: Slot<u64>,
    resolve_after_secs: Slot<u64>,
    liveness_interval: Slot<u64>,
    liveness_floor: Slot<u64>,
    latency_factor: Slot<f64>,
    restart_grace: Slot<u64>,
    catch_up_window: Slot<u64>,
}

impl CanaryLayer {
    fn all(kind: SlotKind) -> Self {
        CanaryLayer {
            enabled: kind.make(),
            topic: kind.make(),
            manage_topic: kind.make(),
            replication_factor: kind.make(),
            min_insync_replicas: kind.make(),
            produce_timeout: kind.make(),
            interval: kind.make(),
            lost_after: kind.make(),
            acks1_probe: kind.make(),
            reassign_stable: kind.make(),
            reassign_min_interval: kind.make(),
            elect_preferred_leaders: kind.make(),
        }
    }
}

impl VerdictLayer {
    fn all(kind: SlotKind) -> Self {
        VerdictLayer {
            open_after: kind.make(),
            resolve_after: kind.make(),
            open_after_secs: kind.make(),
            resolve_after_secs: kind.make(),
            liveness_interval: kind.make(),
            liveness_floor: kind.make(),
            latency_factor: kind.make(),
            restart_grace: kind.make(),
            catch_up_window: kind.make(),
        }
    }
}

/// A whole block is `Unset` when absent and `Bad` when it is not a mapping.
#[derive(Clone, Copy)]
pub(crate) enum SlotKind {
    Unset,
    Bad,
}

impl SlotKind {
    fn make<T>(self) -> Slot<T> {
        match self {
            SlotKind::Unset => Slot::Unset,
            SlotKind::Bad => Slot::Bad,
        }
    }
}

pub(crate) fn empty_layer(kind: SlotKind) -> Layer {
    Layer {
        round_interval: kind.make(),
        connect_timeout: kind.make(),
        request_timeout: kind.make(),
        topic_config_refresh: kind.make(),
        forget_broker_after: kind.make(),
        full_metadata_budget: kind.make(),
        include: kind.make(),
        exclude: kind.make(),
        canary: CanaryLayer::all(kind),
        verdict: VerdictLayer::all(kind),
        librdkafka: BTreeMap::new(),
    }
}

/// Reads the keys a cluster shares with `defaults:` from either.
pub(crate) fn layer(cx: &mut Ctx, f: &mut Fields) -> Layer {
    let rep = &mut cx.rep;
    let round_interval = int_slot(rep, f, &s::ROUND_INTERVAL);
    let connect_timeout = int_slot(rep, f, &s::CONNECT_TIMEOUT);
    let request_timeout = int_slot(rep, f, &s::REQUEST_TIMEOUT);
    let topic_config_refresh = int_slot(rep, f, &s::TOPIC_CONFIG_REFRESH);
    let forget_broker_after = int_slot(rep, f, &s::FORGET_BROKER_AFTER);
    let full_metadata_budget = int_slot(rep, f, &s::FULL_METADATA_BUDGET);

    let (include, exclude) = match f.get("topics") {
        None => (Slot::Unset, Slot::Unset),
        Some(e) => match Fields::open(rep, &e.value, Some(e), f.child("topics")) {
            None => (Slot::Bad, Slot::Bad),
            Some(mut tf) => {
                let include = Slot::read(tf.get(s::TOPICS_INCLUDE_KEY), |e| patterns(rep, e));
                let exclude = Slot::read(tf.get(s::TOPICS_EXCLUDE_KEY), |e| patterns(rep, e));
                tf.finish(rep, &|_| None);
                (include, exclude)
            }
        },
    };

    let canary = match f.get("canary") {
        None => CanaryLayer::all(SlotKind::Unset),
        Some(e) => match Fields::open(rep, &e.value, Some(e), f.child("canary")) {
            None => CanaryLayer::all(SlotKind::Bad),
            Some(mut cf) => {
                let c = CanaryLayer {
                    enabled: bool_slot(rep, &mut cf, &s::CANARY_ENABLED),
                    topic: Slot::read(cf.get(s::CANARY_TOPIC_KEY), |e| {
                        let t = text(rep, e, "a Kafka topic name")?;
                        match checks::topic_name(&t.value) {
                            Ok(()) => Some(t),
                            Err((m, x)) => {
                                rep.add(t.value_pos, m, Some(x));
                                None
                            }
                        }
                    }),
                    manage_topic: bool_slot(rep, &mut cf, &s::CANARY_MANAGE_TOPIC),
                    replication_factor: Slot::read(cf.get(s::CANARY_REPLICATION_FACTOR.key), |e| {
                        if e.value.is_null() {
                            return Some(Set {
                                value: None,
                                key_pos: e.key_pos,
                                value_pos: e.value.pos,
                            });
                        }
                        let v = int(rep, e, &s::CANARY_REPLICATION_FACTOR)?;
                        Some(Set {
                            value: u16::try_from(v.value).ok(),
                            key_pos: v.key_pos,
                            value_pos: v.value_pos,
                        })
                    }),
                    min_insync_replicas: Slot::read(
                        cf.get(s::CANARY_MIN_INSYNC_REPLICAS.key),
                        |e| {
                            if e.value.is_null() {
                                return Some(Set {
                                    value: None,
                                    key_pos: e.key_pos,
                                    value_pos: e.value.pos,
                                });
                            }
                            let v = int(rep, e, &s::CANARY_MIN_INSYNC_REPLICAS)?;
                            Some(Set {
                                value: u16::try_from(v.value).ok(),
                                key_pos: v.key_pos,
                                value_pos: v.value_pos,
                            })
                        },
                    ),
                    produce_timeout: int_slot(rep, &mut cf, &s::CANARY_PRODUCE_TIMEOUT),
                    interval: int_slot(rep, &mut cf, &s::CANARY_INTERVAL),
                    lost_after: int_slot(rep, &mut cf, &s::CANARY_LOST_AFTER),
                    acks1_probe: bool_slot(rep, &mut cf, &s::CANARY_ACKS1_PROBE),
                    reassign_stable: int_slot(rep, &mut cf, &s::CANARY_REASSIGN_STABLE),
                    reassign_min_interval: int_slot(rep, &mut cf, &s::CANARY_REASSIGN_MIN_INTERVAL),
                    elect_preferred_leaders: bool_slot(
                        rep,
                        &mut cf,
                        &s::CANARY_ELECT_PREFERRED_LEADERS,
                    ),
                };
                cf.finish(rep, &|_| None);
                c
            }
        },
    };

    let verdict = match f.get("verdict") {
        None => VerdictLayer::all(SlotKind::Unset),
        Some(e) => match Fields::open(rep, &e.value, Some(e), f.child("verdict")) {
            None => VerdictLayer::all(SlotKind::Bad),
            Some(mut vf) => {
                let v = VerdictLayer {
                    open_after: int_slot(rep, &mut vf, &s::VERDICT_OPEN_AFTER),
                    resolve_after: int_slot(rep, &mut vf, &s::VERDICT_RESOLVE_AFTER),
                    open_after_secs: int_slot(rep, &mut vf, &s::VERDICT_OPEN_AFTER_SECS),
                    resolve_after_secs: int_slot(rep, &mut vf, &s::VERDICT_RESOLVE_AFTER_SECS),
                    liveness_interval: int_slot(rep, &mut vf, &s::VERDICT_LIVENESS_INTERVAL),
                    liveness_floor: int_slot(rep, &mut vf, &s::VERDICT_LIVENESS_FLOOR),
                    latency_factor: Slot::read(vf.get(s::VERDICT_LATENCY_FACTOR.key), |e| {
                        float(rep, e, &s::VERDICT_LATENCY_FACTOR)
                    }),
                    restart_grace: int_slot(rep, &mut vf, &s::VERDICT_RESTART_GRACE),
                    catch_up_window: int_slot(rep, &mut vf, &s::VERDICT_CATCH_UP_WINDOW),
                };
                vf.finish(rep, &|_| None);
                v
            }
        },
    };

    let librdkafka = match f.get("librdkafka") {
        None => BTreeMap::new(),
        Some(e) => librdkafka(rep, e, f.child("librdkafka")),
    };

    Layer {
        round_interval,
        connect_timeout,
        request_timeout,
        topic_config_refresh,
        forget_broker_after,
        full_metadata_budget,
        include,
        exclude,
        canary,
        verdict,
        librdkafka,
    }
}

fn patterns(rep: &mut Report, e: &Entry) -> Option<Set<Patterns>> {
    let expected = "a list of regular expressions";
    let items = list(rep, e, expected, true)?;
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(src) = text_node(rep, item, &e.key, expected) else {
            ok = false;
            continue;
        };
        match checks::pattern(&src) {
            Ok(re) => out.push((src, re)),
            Err((m, x)) => {
                rep.add(item.pos, m, Some(x));
                ok = false;
            }
        }
    }
    ok.then(|| Set {
        value: out,
        key_pos: e.key_pos,
        value_pos: e.value.pos,
    })
}

/// Invalid entries are reported and left out; the problem keeps the config from loading.
fn librdkafka(rep: &mut Report, e: &Entry, path: String) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let entries = match &e.value.kind {
        Kind::Map(entries) => entries,
        _ if e.value.is_null() => return out,
        _ => {
            rep.add(
                e.value.pos,
                format!("wrong type for librdkafka: {}", e.value.describe()),
                Some("a mapping of librdkafka property names to values".into()),
            );
            return out;
        }
    };
    for p in entries {
        let name = p.key.as_str();
        if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c.is_control()) {
            rep.add(
                p.key_pos,
                format!("'{}' is not a librdkafka property name", shorten(name)),
                Some("a name such as socket.keepalive.enable".into()),
            );
            continue;
        }
        if let Some((reserved, instead)) = s::LIBRDKAFKA_RESERVED
            .iter()
            .find(|(r, _)| r.eq_ignore_ascii_case(name))
        {
            rep.add(
                p.key_pos,
                format!("librdkafka property '{reserved}' is set by the watchdog itself in {path}"),
                Some(format!("the {instead} key instead")),
            );
            continue;
        }
        // Numbers and booleans are taken as written: librdkafka parses its own values.
        if let Some(v) = text(rep, p, "a value (text, number or boolean)") {
            out.insert(name.to_string(), v.value);
        }
    }
    out
}

pub(crate) fn cluster(
    cx: &mut Ctx,
    node: &Node,
    idx: usize,
    defaults: &Layer,
) -> (Option<Set<String>>, Option<ClusterConfig>) {
    let path = format!("clusters[{idx}]");
    let Some(mut f) = Fields::open(&mut cx.rep, node, None, path.clone()) else {
        return (None, None);
    };
    let raw_name = match f.get("name") {
        Some(e) => text(&mut cx.rep, e, s::NAME_EXPECTED),
        None => {
            f.missing(&mut cx.rep, "name", s::NAME_EXPECTED.into());
            None
        }
    };
    let name = raw_name
        .as_ref()
        .and_then(|n| match checks::name(&n.value, "cluster") {
            Ok(()) => Some(n.value.clone()),
            Err((m, x)) => {
                cx.rep.add(n.value_pos, m, Some(x));
                None
            }
        });
    let bootstrap_servers = match f.get("bootstrap_servers") {
        Some(e) => bootstrap(&mut cx.rep, e),
        None => {
            f.missing(
                &mut cx.rep,
                "bootstrap_servers",
                "a list of host:port addresses".into(),
            );
            None
        }
    };
    let security_path = f.child("security");
    let security = match f.get("security") {
        Some(e) => security(cx, e, security_path),
        None => Some(Security {
            protocol: s::PROTOCOL_DEFAULT,
            sasl: None,
            tls: None,
        }),
    };
    let own = layer(cx, &mut f);
    let host = match f.get(s::HOST_KEY) {
        None => Some(None),
        Some(e) => super::host::host(cx, e, f.child(s::HOST_KEY)).map(Some),
    };
    let cluster_pos = f.pos;
    f.finish(&mut cx.rep, &|_| None);

    let label = name.clone().unwrap_or_else(|| path.clone());
    let merged = merge(cx, &own, defaults, &label, cluster_pos);
    let built = (|| {
        let m = merged?;
        Some(ClusterConfig {
            name: name?,
            bootstrap_servers: bootstrap_servers?,
            security: security?,
            round_interval: m.round_interval,
            connect_timeout: m.connect_timeout,
            request_timeout: m.request_timeout,
            topic_config_refresh: m.topic_config_refresh,
            forget_broker_after: m.forget_broker_after,
            full_metadata_budget: m.full_metadata_budget,
            topics: m.topics,
            canary: m.canary,
            verdict: m.verdict,
            librdkafka: m.librdkafka,
            host: host?,
        })
    })();
    (raw_name, built)
}

fn bootstrap(rep: &mut Report, e: &Entry) -> Option<Vec<String>> {
    let expected = "a list of host:port addresses";
    let items = list(rep, e, expected, true)?;
    if items.is_empty() {
        rep.add(
            e.key_pos,
            "bootstrap_servers is empty".into(),
            Some("at least one host:port address".into()),
        );
        return None;
    }
    let mut out = Vec::new();
    let mut ok = true;
    for item in items {
        let Some(t) = text_node(rep, item, "bootstrap_servers", expected) else {
            ok = false;
            continue;
        };
        // A comma-separated string is how Kafka tools take this list; accepting it
        // saves a round trip for people pasting from a properties file.
        for part in t.split(',').map(str::trim) {
            match checks::host_port(part) {
                Ok(()) => out.push(part.to_string()),
                Err((m, x)) => {
                    rep.add(item.pos, m, Some(x));
                    ok = false;
                }
            }
        }
    }
    ok.then_some(out)
}

/// A cluster's shared settings once every layer is applied.
struct Merged {
    round_interval: Duration,
    connect_timeout: Duration,
    request_timeout: Duration,
    topic_config_refresh: Duration,
    forget_broker_after: Duration,
    full_metadata_budget: u64,
    topics: TopicFilter,
    canary: CanaryConfig,
    verdict: VerdictConfig,
    librdkafka: BTreeMap<String, String>,
}

/// Applies `defaults:` and the built-in defaults to one cluster's own settings and checks
/// the rules between keys.
fn merge(cx: &mut Ctx, own: &Layer, d: &Layer, label: &str, cluster_pos: Pos) -> Option<Merged> {
    let round = pick(
        &own.round_interval,
        &d.round_interval,
        s::ROUND_INTERVAL.default,
    );
    let connect = pick(
        &own.connect_timeout,
        &d.connect_timeout,
        s::CONNECT_TIMEOUT.default,
    );
    let request = pick(
        &own.request_timeout,
        &d.request_timeout,
        s::REQUEST_TIMEOUT.default,
    );
    let refresh = pick(
        &own.topic_config_refresh,
        &d.topic_config_refresh,
        s::TOPIC_CONFIG_REFRESH.default,
    );
    let forget = pick(
        &own.forget_broker_after,
        &d.forget_broker_after,
        s::FORGET_BROKER_AFTER.default,
    );
    let budget = pick(
        &own.full_metadata_budget,
        &d.full_metadata_budget,
        s::FULL_METADATA_BUDGET.default,
    );
    let builtin_patterns = |list: &[&str]| -> Patterns {
        list.iter()
            .filter_map(|p| checks::pattern(p).ok().map(|r| (p.to_string(), r)))
            .collect()
    };
    let include = pick(
        &own.include,
        &d.include,
        builtin_patterns(s::TOPICS_INCLUDE_DEFAULT),
    );
    let exclude = pick(
        &own.exclude,
        &d.exclude,
        builtin_patterns(s::TOPICS_EXCLUDE_DEFAULT),
    );

    let (oc, dc) = (&own.canary, &d.canary);
    let enabled = pick(&oc.enabled, &dc.enabled, s::CANARY_ENABLED.default);
    let topic = pick(&oc.topic, &dc.topic, s::CANARY_TOPIC_DEFAULT.to_string());
    let manage_topic = pick(
        &oc.manage_topic,
        &dc.manage_topic,
        s::CANARY_MANAGE_TOPIC.default,
    );
    let replication_factor = pick(&oc.replication_factor, &dc.replication_factor, None);
    let min_insync_replicas = pick(&oc.min_insync_replicas, &dc.min_insync_replicas, None);
    let produce_timeout = pick(
        &oc.produce_timeout,
        &dc.produce_timeout,
        s::CANARY_PRODUCE_TIMEOUT.default,
    );
    let interval = pick(&oc.interval, &dc.interval, s::CANARY_INTERVAL.default);
    let lost_after = pick(&oc.lost_after, &dc.lost_after, s::CANARY_LOST_AFTER.default);
    let acks1 = pick(
        &oc.acks1_probe,
        &dc.acks1_probe,
        s::CANARY_ACKS1_PROBE.default,
    );
    let stable = pick(
        &oc.reassign_stable,
        &dc.reassign_stable,
        s::CANARY_REASSIGN_STABLE.default,
    );
    let min_interval = pick(
        &oc.reassign_min_interval,
        &dc.reassign_min_interval,
        s::CANARY_REASSIGN_MIN_INTERVAL.default,
    );
    let elect = pick(
        &oc.elect_preferred_leaders,
        &dc.elect_preferred_leaders,
        s::CANARY_ELECT_PREFERRED_LEADERS.default,
    );

    let (ov, dv) = (&own.verdict, &d.verdict);
    let open_after = pick(
        &ov.open_after,
        &dv.open_after,
        s::VERDICT_OPEN_AFTER.default,
    );
    let resolve_after = pick(
        &ov.resolve_after,
        &dv.resolve_after,
        s::VERDICT_RESOLVE_AFTER.default,
    );
    let open_after_secs = pick(
        &ov.open_after_secs,
        &dv.open_after_secs,
        s::VERDICT_OPEN_AFTER_SECS.default,
    );
    let resolve_after_secs = pick(
        &ov.resolve_after_secs,
        &dv.resolve_after_secs,
        s::VERDICT_RESOLVE_AFTER_SECS.default,
    );
    let liveness_interval = pick(
        &ov.liveness_interval,
        &dv.liveness_interval,
        s::VERDICT_LIVENESS_INTERVAL.default,
    );
    let liveness_floor = pick(
        &ov.liveness_floor,
        &dv.liveness_floor,
        s::VERDICT_LIVENESS_FLOOR.default,
    );
    let factor = pick(
        &ov.latency_factor,
        &dv.latency_factor,
        s::VERDICT_LATENCY_FACTOR.default,
    );
    let restart_grace = pick(
        &ov.restart_grace,
        &dv.restart_grace,
        s::VERDICT_RESTART_GRACE.default,
    );
    let catch_up_window = pick(
        &ov.catch_up_window,
        &dv.catch_up_window,
        s::VERDICT_CATCH_UP_WINDOW.default,
    );

    if let Some(round) = &round {
        let mut below = |t: &Option<Resolved<u64>>, spec: &IntSpec| {
            if let Some(t) = t {
                below_round(cx, label, cluster_pos, round, t, spec);
            }
        };
        below(&request, &s::REQUEST_TIMEOUT);
        below(&connect, &s::CONNECT_TIMEOUT);
        // A disabled canary never produces, so its timeout cannot stall a round.
        if enabled.as_ref().is_some_and(|e| e.value) {
            below(&produce_timeout, &s::CANARY_PRODUCE_TIMEOUT);
        }
    }

    let mut librdkafka = d.librdkafka.clone();
    librdkafka.extend(own.librdkafka.clone());

    let secs = |r: Option<Resolved<u64>>| r.map(|r| Duration::from_secs(r.value));
    let millis = |r: Option<Resolved<u64>>| r.map(|r| Duration::from_millis(r.value));
    let include = include?.value;
    let exclude = exclude?.value;
    let round_interval = secs(round)?;
    Some(Merged {
        round_interval,
        connect_timeout: millis(connect)?,
        request_timeout: millis(request)?,
        topic_config_refresh: secs(refresh)?,
        forget_broker_after: secs(forget)?,
        full_metadata_budget: budget?.value,
        topics: TopicFilter {
            include_src: include.iter().map(|(s, _)| s.clone()).collect(),
            include: include.into_iter().map(|(_, r)| r).collect(),
            exclude_src: exclude.iter().map(|(s, _)| s.clone()).collect(),
            exclude: exclude.into_iter().map(|(_, r)| r).collect(),
        },
        canary: CanaryConfig {
            enabled: enabled?.value,
            topic: topic?.value,
            manage_topic: manage_topic?.value,
            replication_factor: replication_factor?.value,
            min_insync_replicas: min_insync_replicas?.value,
            produce_timeout: millis(produce_timeout)?,
            interval: millis(interval)?,
            lost_after: secs(lost_after)?,
            acks1_probe: acks1?.value,
            reassign_stable: secs(stable)?,
            reassign_min_interval: secs(min_interval)?,
            elect_preferred_leaders: elect?.value,
        },
        verdict: {
            let (open, open_rounds) = confirmation(open_after_secs?, open_after?, round_interval);
            let (resolve, resolve_rounds) =
                confirmation(resolve_after_secs?, resolve_after?, round_interval);
            VerdictConfig {
                open_after: open,
                resolve_after: resolve,
                deprecated_rounds: (open_rounds.is_some() || resolve_rounds.is_some())
                    .then_some((open_rounds, resolve_rounds)),
                liveness_interval: millis(liveness_interval)?,
                liveness_floor: millis(liveness_floor)?,
                latency_degraded_factor: factor?.value,
                restart_grace: secs(restart_grace)?,
                catch_up_window: secs(catch_up_window)?,
            }
        },
        librdkafka,
    })
}

/// A confirmation duration: the `_secs` key when written (in the cluster or `defaults:`),
/// else the deprecated round count when written, converted with the round interval (and
/// returned, for the deprecation message), else the built-in duration.
fn confirmation(
    secs: Resolved<u64>,
    rounds: Resolved<u64>,
    round: Duration,
) -> (Duration, Option<u32>) {
    if !matches!(secs.from, Origin::Builtin) || matches!(rounds.from, Origin::Builtin) {
        return (Duration::from_secs(secs.value), None);
    }
    // The schema's range stops at 1000, far inside u32.
    let n = u32::try_from(rounds.value).unwrap_or(u32::MAX);
    (rounds_as_duration(n, round), Some(n))
}

/// What a count of rounds in a row meant with rounds `round` apart: present in N rounds is
/// held over N - 1 intervals; a tenth less, because round starts jitter by milliseconds.
pub fn rounds_as_duration(n: u32, round: Duration) -> Duration {
    round.saturating_mul(n.saturating_sub(1)) * 9 / 10
}

/// A timeout at or above the round interval would let one silent broker stall the whole
/// round, which is the failure this daemon exists to see. The problem points at whichever
/// of the two keys was written, preferring the timeout.
fn below_round(
    cx: &mut Ctx,
    cluster: &str,
    cluster_pos: Pos,
    round: &Resolved<u64>,
    t: &Resolved<u64>,
    spec: &IntSpec,
) {
    let limit_ms = round.value.saturating_mul(1000);
    if t.value < limit_ms {
        return;
    }
    let (key, r, v) = (spec.key, round.value, t.value);
    let round_key = s::ROUND_INTERVAL.key;
    match t.from {
        Origin::Cluster(pos) => cx.rep.add(
            pos,
            format!("{key} {v} is not below {round_key} ({r} s)"),
            Some(format!("a value under {limit_ms}")),
        ),
        Origin::Defaults(pos) => cx.rep.add(
            pos,
            format!(
                "{key} {v} (from defaults) is not below {round_key} of cluster '{cluster}' ({r} s)"
            ),
            Some(format!("a value under {limit_ms}")),
        ),
        Origin::Builtin => {
            let pos = match round.from {
                Origin::Cluster(p) | Origin::Defaults(p) => p,
                Origin::Builtin => cluster_pos,
            };
            cx.rep.add(
                pos,
                format!("{round_key} {r} leaves no room for the default {key} of {v} in cluster '{cluster}'"),
                Some(format!("at least {} s, or a smaller {key}", v / 1000 + 1)),
            );
        }
    }
}
