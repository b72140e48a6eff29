//! What a cluster shares with `defaults:`: the layer read from either, and the merge of a
//! cluster's own layer over `defaults:` over the built-in values, with the rules that tie
//! several keys together. The keys themselves are declared in `schema`.
//!
//! A value that was written but is wrong is kept apart from a value that was not written
//! (`Slot::Bad` against `Slot::Unset`), so a bad value never silently falls back to a
//! default and then trips a second, misleading problem in a cross-key check.

use std::collections::BTreeMap;
use std::time::Duration;

use super::ctx::Ctx;
use super::keys::{read_block, KeyKind, SlotKind};
use super::read::{text, Fields, Origin, Resolved};
use super::report::Report;
use super::schema::{
    self as s, CanaryLayer, CertificatesLayer, Confirmation, ConfirmationLayer, ConfirmationPicked,
    CoordinatorsLayer, TimingLayer, TopicsLayer, VerdictKeys, VerdictLayer,
};
use super::types::*;
use super::yaml::{shorten, Entry, Kind, Pos};

/// The settings a cluster shares with `defaults:`: the blocks `schema` declares, and the
/// librdkafka escape hatch.
pub(crate) struct Layer {
    timing: TimingLayer,
    topics: TopicsLayer,
    canary: CanaryLayer,
    coordinators: CoordinatorsLayer,
    certificates: CertificatesLayer,
    confirmation: ConfirmationLayer,
    verdict: VerdictLayer,
    librdkafka: BTreeMap<String, String>,
}

pub(crate) fn empty_layer(kind: SlotKind) -> Layer {
    Layer {
        timing: TimingLayer::all(kind),
        topics: TopicsLayer::all(kind),
        canary: CanaryLayer::all(kind),
        coordinators: CoordinatorsLayer::all(kind),
        certificates: CertificatesLayer::all(kind),
        confirmation: ConfirmationLayer::all(kind),
        verdict: VerdictLayer::all(kind),
        librdkafka: BTreeMap::new(),
    }
}

/// Reads the keys a cluster shares with `defaults:` from either.
pub(crate) fn layer(cx: &mut Ctx, f: &mut Fields) -> Layer {
    let rep = &mut cx.rep;
    // In the order the reference lists them, which is the order "expected one of" does.
    let timing = TimingLayer::read(rep, f);
    let topics = TopicsLayer::read_block(rep, f, "topics");
    let canary = CanaryLayer::read_block(rep, f, "canary");
    let coordinators = CoordinatorsLayer::read_block(rep, f, "coordinators");
    let certificates = CertificatesLayer::read_block(rep, f, "certificates");
    let (confirmation, verdict) = verdict_layers(rep, f);
    let librdkafka = match f.get("librdkafka") {
        None => BTreeMap::new(),
        Some(e) => librdkafka(rep, e, f.child("librdkafka")),
    };
    Layer {
        timing,
        topics,
        canary,
        coordinators,
        certificates,
        confirmation,
        verdict,
        librdkafka,
    }
}

/// Both halves of the `verdict:` block from its one mapping, in the order the reference
/// lists them, so a key neither knows is reported once: unset when the block is absent,
/// bad when it is not a mapping.
fn verdict_layers(rep: &mut Report, f: &mut Fields) -> (ConfirmationLayer, VerdictLayer) {
    read_block(
        rep,
        f,
        "verdict",
        |kind| (ConfirmationLayer::all(kind), VerdictLayer::all(kind)),
        |rep, block| {
            let confirmation = ConfirmationLayer::read(rep, block);
            (confirmation, VerdictLayer::read(rep, block))
        },
    )
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
        if let Some((message, instead)) = refused(name, &path) {
            rep.add(p.key_pos, message, Some(instead));
            continue;
        }
        // Numbers and booleans are taken as written: librdkafka parses its own values.
        if let Some(v) = text(rep, p, "a value (text, number or boolean)") {
            out.insert(name.to_string(), v.value);
        }
    }
    out
}

/// Why the escape hatch may not set `name`, and what to write instead: a property the
/// watchdog sets from its own keys, or one that carries a credential.
fn refused(name: &str, path: &str) -> Option<(String, String)> {
    let find = |table: &'static [(&'static str, &'static str)]| {
        table.iter().find(|(p, _)| p.eq_ignore_ascii_case(name))
    };
    if let Some((p, instead)) = find(s::LIBRDKAFKA_RESERVED) {
        return Some((
            format!("librdkafka property '{p}' is set by the watchdog itself in {path}"),
            format!("the {instead} key instead"),
        ));
    }
    if let Some((p, instead)) = find(s::LIBRDKAFKA_CREDENTIALS) {
        return Some((
            format!("librdkafka property '{p}' in {path} carries a credential, which goes through the watchdog's own keys"),
            format!("{instead} instead"),
        ));
    }
    let lower = name.to_ascii_lowercase();
    lower.starts_with(s::LIBRDKAFKA_OAUTH_PREFIX).then(|| {
        (
            format!("librdkafka property '{lower}' is set by the watchdog itself in {path}"),
            format!("{} instead", s::LIBRDKAFKA_OAUTH),
        )
    })
}

/// A cluster's shared settings once every layer is applied.
pub(crate) struct Merged {
    pub timing: s::Timing,
    pub topics: TopicFilter,
    pub canary: CanaryConfig,
    pub coordinators: CoordinatorsConfig,
    pub certificates: CertificatesConfig,
    pub verdict: VerdictConfig,
    pub librdkafka: BTreeMap<String, String>,
}

/// Applies `defaults:` and the built-in defaults to one cluster's own settings and checks
/// the rules between keys.
pub(crate) fn merge(
    cx: &mut Ctx,
    own: &Layer,
    d: &Layer,
    label: &str,
    cluster_pos: Pos,
) -> Option<Merged> {
    let timing = own.timing.pick(&d.timing);
    let topics = own.topics.pick(&d.topics);
    let canary = own.canary.pick(&d.canary);
    let coordinators = own.coordinators.pick(&d.coordinators);
    let certificates = own.certificates.pick(&d.certificates);
    let confirmation = own.confirmation.pick(&d.confirmation);
    let verdict = own.verdict.pick(&d.verdict);

    if let Some(round) = &timing.round_interval {
        let mut below = |t: &Option<Resolved<u64>>, key: &'static str| {
            if let Some(t) = t {
                below_round(cx, label, cluster_pos, round, t, key);
            }
        };
        below(&timing.request_timeout, s::REQUEST_TIMEOUT.key());
        below(&timing.connect_timeout, s::CONNECT_TIMEOUT.key());
        // A disabled canary never produces, so its timeout cannot stall a round.
        if canary.enabled.as_ref().is_some_and(|e| e.value) {
            below(&canary.produce_timeout, s::CANARY_PRODUCE_TIMEOUT.key());
        }
    }

    let mut librdkafka = d.librdkafka.clone();
    librdkafka.extend(own.librdkafka.clone());

    let timing_values = timing.values();
    let topics = topics.values();
    let canary = canary.values();
    let coordinators = coordinators.values();
    let certificates = certificates.values();
    let verdict = verdict_config(
        &confirmation,
        verdict.values(),
        timing_values.as_ref()?.round_interval,
    );
    let topics = topics?;
    Some(Merged {
        timing: timing_values?,
        topics: TopicFilter {
            include_src: topics.include.iter().map(|(s, _)| s.clone()).collect(),
            include: topics.include.into_iter().map(|(_, r)| r).collect(),
            exclude_src: topics.exclude.iter().map(|(s, _)| s.clone()).collect(),
            exclude: topics.exclude.into_iter().map(|(_, r)| r).collect(),
        },
        canary: canary?,
        coordinators: coordinators?,
        certificates: certificates?,
        verdict: verdict?,
        librdkafka,
    })
}

/// The `verdict:` block resolved: the confirmation durations come from the `_secs` keys or
/// the deprecated round counts (`confirmation`), the other keys as written.
fn verdict_config(
    p: &ConfirmationPicked,
    keys: Option<VerdictKeys>,
    round: Duration,
) -> Option<VerdictConfig> {
    let open = confirmation(
        p.open_after_secs.as_ref()?,
        p.open_after_rounds.as_ref()?,
        round,
    );
    let resolve = confirmation(
        p.resolve_after_secs.as_ref()?,
        p.resolve_after_rounds.as_ref()?,
        round,
    );
    Some(VerdictConfig::new(open, resolve, keys?))
}

impl VerdictConfig {
    /// `open` and `resolve` are the confirmation durations, each with the deprecated round
    /// count that decided it, if one did.
    fn new(
        open: (Duration, Option<u32>),
        resolve: (Duration, Option<u32>),
        keys: VerdictKeys,
    ) -> Self {
        VerdictConfig {
            open_after: open.0,
            resolve_after: resolve.0,
            deprecated_rounds: (open.1.is_some() || resolve.1.is_some())
                .then_some((open.1, resolve.1)),
            keys,
        }
    }
}

/// The built-in values, as a configuration that does not set them gets.
impl Default for VerdictConfig {
    fn default() -> Self {
        let c = Confirmation::default();
        VerdictConfig::new(
            (c.open_after_secs, None),
            (c.resolve_after_secs, None),
            VerdictKeys::default(),
        )
    }
}

/// A confirmation duration: the `_secs` key when written (in the cluster or `defaults:`),
/// else the deprecated round count when written, converted with the round interval (and
/// returned, for the deprecation message), else the built-in duration.
fn confirmation(
    secs: &Resolved<u64>,
    rounds: &Resolved<u64>,
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
    key: &'static str,
) {
    let limit_ms = round.value.saturating_mul(1000);
    if t.value < limit_ms {
        return;
    }
    let (r, v) = (round.value, t.value);
    let round_key = s::ROUND_INTERVAL.key();
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
