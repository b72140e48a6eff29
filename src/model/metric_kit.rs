//! What every module that owns metric families shares: the family types, typed label sets
//! of the common shapes (a cluster, a broker of a cluster), and registering a family in one
//! call. Pure types over `prometheus-client`; `metrics` composes the modules' families into
//! one registry per scrape.
//!
//! A label set is a struct deriving `EncodeLabelSet`: its field names are the label names and
//! their order the order on the page, so a label cannot be misspelt in one place or come out
//! in another order on one series than on the others. Label values that come from an enum
//! are its `as_label()` words (`&'static str`).
//!
//! A module's metrics take one of two shapes, named the same everywhere:
//! - `XMetrics::register(reg) -> XMetrics`: families kept from one round to the next and set
//!   as rounds end (the judge's, liveness, host);
//! - `encode(reg, snapshot)`: families built from a snapshot when the page is scraped
//!   (counters kept elsewhere: the notifier's, the canary's, the process's own).

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::AtomicU64;
use std::time::SystemTime;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::model::round::BrokerId;

/// The name the page gives the cluster label by default. `metrics.cluster_label` names it
/// otherwise, for a Prometheus whose own `cluster` label (the Kubernetes cluster, set by
/// Grafana's k8s-monitoring, Mimir or Thanos) would turn the watchdog's into
/// `exported_cluster`: the label sets below keep the field `cluster`, and the page is
/// renamed as it is written (`serve::metrics::rename_label`).
pub const CLUSTER_LABEL: &str = "cluster";

/// What a `Family` needs of its label set to be registered.
pub trait LabelSet: Clone + Hash + Eq + EncodeLabelSet + Debug + Send + Sync + 'static {}
impl<T: Clone + Hash + Eq + EncodeLabelSet + Debug + Send + Sync + 'static> LabelSet for T {}

pub type GaugeFamily<L> = Family<L, Gauge<f64, AtomicU64>>;
/// Whole-number gauges (counts kept as they change rather than set from a round).
pub type IntGaugeFamily<L> = Family<L, Gauge>;
pub type CounterFamily<L> = Family<L, Counter<u64>>;
pub type FloatCounterFamily<L> = Family<L, Counter<f64, AtomicU64>>;

/// A series without labels that is still written as a family (`name{} value`), as the
/// page has always had it.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct NoLabels {}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ClusterLabels {
    pub cluster: String,
}

impl ClusterLabels {
    pub fn new(cluster: &str) -> Self {
        ClusterLabels {
            cluster: cluster.to_string(),
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrokerLabels {
    pub cluster: String,
    pub broker: BrokerId,
}

impl BrokerLabels {
    pub fn new(cluster: &str, broker: BrokerId) -> Self {
        BrokerLabels {
            cluster: cluster.to_string(),
            broker,
        }
    }
}

/// A broker and one state of it, for the one-gauge-per-state families (`broker_state`,
/// `broker_incident_state`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BrokerStateLabels {
    #[prometheus(flatten)]
    pub broker: BrokerLabels,
    pub state: &'static str,
}

/// Registers a gauge family under `name` and returns the handle to fill it.
pub fn gauge<L: LabelSet>(reg: &mut Registry, name: &str, help: &str) -> GaugeFamily<L> {
    let f = GaugeFamily::<L>::default();
    reg.register(name, help, f.clone());
    f
}

/// Registers a counter family (written `name_total`) and returns the handle to fill it.
pub fn counter<L: LabelSet>(reg: &mut Registry, name: &str, help: &str) -> CounterFamily<L> {
    let f = CounterFamily::<L>::default();
    reg.register(name, help, f.clone());
    f
}

/// Registers a counter family of fractional values (CPU seconds).
pub fn float_counter<L: LabelSet>(
    reg: &mut Registry,
    name: &str,
    help: &str,
) -> FloatCounterFamily<L> {
    let f = FloatCounterFamily::<L>::default();
    reg.register(name, help, f.clone());
    f
}

pub fn set<L: LabelSet>(f: &GaugeFamily<L>, labels: L, v: f64) {
    f.get_or_create(&labels).set(v);
}

/// 1 or 0.
pub fn flag(b: bool) -> f64 {
    f64::from(u8::from(b))
}

/// Unix seconds; 0 before the epoch.
pub fn secs(t: SystemTime) -> f64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}
