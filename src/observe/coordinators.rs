//! Probes every group coordinator shard: one synthetic consumer group per
//! `__consumer_offsets` partition (its id chosen so that Kafka's hash places it there), and,
//! per broker, an OffsetFetch for the groups of the partitions it leads, with the probe's
//! own deadline. Beside each, an ApiVersions on a second connection to the same broker: a
//! coordinator that does not answer while the broker does is stuck (its event processor
//! threads stopped, a shard wedged), which neither the data plane's probes nor the canary
//! (it reads by assignment, never through a coordinator) can see. A broker that answers
//! neither is silent as a whole: the liveness check names that, not this.
//!
//! OffsetFetch reads; the synthetic groups never join, commit or hold members, so they
//! cost Kafka nothing but the lookup. The look runs on a task of its own every
//! `coordinators.interval_ms`, so that a stuck coordinator is named within seconds.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::join_all;
use tokio::sync::watch;

use crate::model::coordinators::{
    group_for, CoordinatorLook, CoordinatorObservation, ShardError, ShardProbe,
    COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
};
use crate::model::round::BrokerId;
use crate::observe::wire::{BrokerClient, WireError, WireOptions};

/// How to probe one cluster's group coordinators.
#[derive(Debug, Clone)]
pub struct CoordinatorSettings {
    pub cluster: String,
    /// Synthetic groups are `<group_prefix>-<partition>-<n>`.
    pub group_prefix: String,
    /// Each OffsetFetch and each ApiVersions beside it is given this long.
    pub timeout: Duration,
    pub interval: Duration,
    /// Security as for the brokers; `request_timeout` is `timeout`.
    pub wire: WireOptions,
}

/// Who leads each `__consumer_offsets` partition, from the newest view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ShardLeaders {
    /// 0 while the topic does not exist.
    pub partitions: u32,
    /// Per partition with a leader: the leader and its address.
    pub leaders: BTreeMap<i32, (BrokerId, String)>,
}

/// The codes that say a group's coordinator is not there to serve it.
const COORDINATOR_ERRORS: [i16; 3] = [
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
];
/// The watchdog may not describe its own synthetic groups.
const GROUP_AUTHORIZATION_FAILED: i16 = 30;

/// The other connection answered within this share of the deadline: the broker works.
/// A broker starved of CPU answers slowly everywhere and is the latency rules' business.
const CONTROL_SHARE: u32 = 4;

/// One broker's connections and the streaks its answers form.
#[derive(Default)]
struct Target {
    client: Option<BrokerClient>,
    control: Option<BrokerClient>,
    unanswered_in_a_row: u32,
    unanswered_since: Option<SystemTime>,
    errors: BTreeMap<i32, (i16, SystemTime)>,
}

/// Probes the coordinators, keeping connections and streaks between looks.
pub struct CoordinatorProber {
    settings: CoordinatorSettings,
    targets: BTreeMap<BrokerId, Target>,
    /// Synthetic groups by shard, for the partition count they were chosen for.
    groups: (u32, Vec<String>),
}

impl CoordinatorProber {
    pub fn new(settings: CoordinatorSettings) -> Self {
        CoordinatorProber {
            settings,
            targets: BTreeMap::new(),
            groups: (0, Vec::new()),
        }
    }

    fn group(&mut self, shard: i32, partitions: u32) -> String {
        if self.groups.0 != partitions {
            let prefix = &self.settings.group_prefix;
            self.groups = (
                partitions,
                (0..partitions as i32)
                    .map(|s| group_for(prefix, s, partitions))
                    .collect(),
            );
        }
        self.groups.1[shard as usize].clone()
    }

    /// One look at every broker that leads a shard, all at once.
    pub async fn look(&mut self, plan: &ShardLeaders) -> CoordinatorObservation {
        let at = SystemTime::now();
        let mut by_broker: BTreeMap<BrokerId, (String, Vec<(i32, String)>)> = BTreeMap::new();
        for (shard, (broker, address)) in &plan.leaders {
            if *shard < 0 || *shard as u32 >= plan.partitions {
                continue;
            }
            let group = self.group(*shard, plan.partitions);
            by_broker
                .entry(*broker)
                .or_insert_with(|| (address.clone(), Vec::new()))
                .1
                .push((*shard, group));
        }
        self.targets.retain(|b, _| by_broker.contains_key(b));
        for b in by_broker.keys() {
            self.targets.entry(*b).or_default();
        }
        let settings = &self.settings;
        let probes = self.targets.iter_mut().map(|(broker, t)| {
            let (address, shards) = &by_broker[broker];
            probe_broker(*broker, address, shards, t, settings, at)
        });
        let brokers = join_all(probes)
            .await
            .into_iter()
            .map(|l| (l.broker, l))
            .collect();
        CoordinatorObservation {
            at,
            offsets_partitions: plan.partitions,
            brokers,
            timeout: self.settings.timeout,
            blind: (plan.partitions == 0).then(|| {
                "__consumer_offsets does not exist yet (no consumer group has been used): no coordinator to probe".to_string()
            }),
        }
    }
}

/// Opens a connection when there is none; `Err` when that fails.
async fn connected<'a>(
    slot: &'a mut Option<BrokerClient>,
    address: &str,
    wire: &WireOptions,
) -> Result<&'a mut BrokerClient, WireError> {
    if slot.as_ref().is_none_or(|c| !c.is_usable()) {
        *slot = Some(BrokerClient::connect(address, wire).await?.client);
    }
    Ok(slot.as_mut().expect("just connected"))
}

/// The OffsetFetch of one broker's groups: all in one request from v8, else one at a time
/// within the same deadline. Each group's error code, or the failure.
async fn fetch(
    slot: &mut Option<BrokerClient>,
    address: &str,
    groups: &[String],
    settings: &CoordinatorSettings,
) -> Result<(std::time::Duration, Vec<(String, Option<i16>)>), WireError> {
    let started = tokio::time::Instant::now();
    let deadline = started + settings.timeout;
    let client = connected(slot, address, &settings.wire).await?;
    let per_request = client.groups_per_offset_fetch();
    let mut answers = Vec::with_capacity(groups.len());
    for chunk in groups.chunks(per_request.min(groups.len()).max(1)) {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let answer = client.fetch_group_offsets(chunk, left).await?;
        answers.extend(answer.value);
    }
    Ok((started.elapsed(), answers))
}

async fn probe_broker(
    broker: BrokerId,
    address: &str,
    shards: &[(i32, String)],
    t: &mut Target,
    settings: &CoordinatorSettings,
    at: SystemTime,
) -> CoordinatorLook {
    let groups: Vec<String> = shards.iter().map(|(_, g)| g.clone()).collect();
    let Target {
        client, control, ..
    } = t;
    let control_ping = async {
        let c = connected(control, address, &settings.wire).await?;
        c.ping().await
    };
    let (fetched, pinged) = futures::join!(fetch(client, address, &groups, settings), control_ping);
    // A failed connection is given up: a late answer must never be read as the next one's.
    if fetched.is_err() {
        *client = None;
    }
    let control_latency = match pinged {
        Ok(l) => Some(l),
        Err(_) => {
            *control = None;
            None
        }
    };
    let quick = control_latency.is_some_and(|l| l <= settings.timeout / CONTROL_SHARE);
    let last = match fetched {
        Ok((_, answers))
            if answers
                .iter()
                .any(|(_, c)| *c == Some(GROUP_AUTHORIZATION_FAILED)) =>
        {
            // Its answer proves it works; what is refused is the watchdog's access.
            t.unanswered_in_a_row = 0;
            t.unanswered_since = None;
            t.errors.clear();
            ShardProbe::Failed {
                kind: crate::model::round::FailureKind::Authorization,
                detail: format!(
                    "GROUP_AUTHORIZATION_FAILED: the watchdog's principal needs Describe on the groups prefixed {}",
                    settings.group_prefix
                ),
            }
        }
        Ok((latency, answers)) => {
            t.unanswered_in_a_row = 0;
            t.unanswered_since = None;
            let now = SystemTime::now();
            for (shard, group) in shards {
                let code = answers
                    .iter()
                    .find(|(g, _)| g == group)
                    .and_then(|(_, c)| *c);
                match code {
                    Some(code) if COORDINATOR_ERRORS.contains(&code) => {
                        let e = t.errors.entry(*shard).or_insert((code, now));
                        if e.0 != code {
                            *e = (code, now);
                        }
                    }
                    // Answered by its coordinator (an error of another kind is about the
                    // group, not the coordinator).
                    _ => {
                        t.errors.remove(shard);
                    }
                }
            }
            ShardProbe::Answered { latency }
        }
        Err(e) if e.kind() == crate::model::round::FailureKind::Timeout => {
            if quick {
                t.unanswered_in_a_row += 1;
                t.unanswered_since.get_or_insert(at);
            } else {
                // Silent as a whole (frozen, paused): not the coordinator's own fault.
                t.unanswered_in_a_row = 0;
                t.unanswered_since = None;
            }
            ShardProbe::Unanswered
        }
        Err(e) => {
            t.unanswered_in_a_row = 0;
            t.unanswered_since = None;
            ShardProbe::Failed {
                kind: e.kind(),
                detail: e.to_string(),
            }
        }
    };
    t.errors
        .retain(|s, _| shards.iter().any(|(shard, _)| shard == s));
    CoordinatorLook {
        broker,
        address: address.to_string(),
        shards: shards.iter().map(|(s, _)| *s).collect(),
        last,
        control_latency,
        unanswered_in_a_row: t.unanswered_in_a_row,
        unanswered_since: t.unanswered_since,
        errors: t
            .errors
            .iter()
            .map(|(shard, (code, since))| ShardError {
                shard: *shard,
                code: *code,
                since: *since,
            })
            .collect(),
    }
}

/// The daemon's continuous probe: a task that looks every `interval` at the shards the
/// cluster loop last said who leads, and publishes each look.
pub struct CoordinatorWatch {
    looks: watch::Receiver<Option<Arc<CoordinatorObservation>>>,
    publish: Arc<watch::Sender<Option<Arc<CoordinatorObservation>>>>,
    /// `None` until the first round said who leads what.
    plan: watch::Sender<Option<ShardLeaders>>,
    settings: CoordinatorSettings,
    task: tokio::task::JoinHandle<()>,
}

impl CoordinatorWatch {
    pub fn start(settings: CoordinatorSettings) -> Self {
        let (tx, looks) = watch::channel(None);
        let publish = Arc::new(tx);
        let (plan, plan_rx) = watch::channel(None);
        let task = look_task(
            CoordinatorProber::new(settings.clone()),
            settings.interval,
            publish.clone(),
            plan_rx,
        );
        CoordinatorWatch {
            looks,
            publish,
            plan,
            settings,
            task,
        }
    }

    /// Starts the task again if it ended (a panic), and says so.
    pub fn revive(&mut self) {
        if !self.task.is_finished() {
            return;
        }
        tracing::error!(cluster = %self.settings.cluster, "the group coordinator probe's task ended; starting it again");
        crate::model::task_restarts::record("coordinator_watch", &self.settings.cluster);
        self.task = look_task(
            CoordinatorProber::new(self.settings.clone()),
            self.settings.interval,
            self.publish.clone(),
            self.plan.subscribe(),
        );
    }

    /// Who leads the shards from now on.
    pub fn plan(&self, leaders: ShardLeaders) {
        self.plan.send_if_modified(|p| {
            let changed = p.as_ref() != Some(&leaders);
            *p = Some(leaders);
            changed
        });
    }

    pub fn latest(&self) -> Option<Arc<CoordinatorObservation>> {
        self.looks.borrow().clone()
    }

    /// Returns when a new look is published.
    pub async fn changed(&mut self) {
        if self.looks.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

fn look_task(
    mut prober: CoordinatorProber,
    interval: Duration,
    publish: Arc<watch::Sender<Option<Arc<CoordinatorObservation>>>>,
    mut plan_rx: watch::Receiver<Option<ShardLeaders>>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut next = tokio::time::Instant::now();
        loop {
            tokio::time::sleep_until(next).await;
            next = tokio::time::Instant::now() + interval;
            let Some(plan) = plan_rx.borrow_and_update().clone() else {
                // Before the first round: wait for the plan.
                if plan_rx.changed().await.is_err() {
                    return;
                }
                continue;
            };
            let look = prober.look(&plan).await;
            publish.send_replace(Some(Arc::new(look)));
        }
    })
}

impl Drop for CoordinatorWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The shards' leaders in a view: `__consumer_offsets`' partitions with a leader the view
/// has an address for.
pub fn shard_leaders(
    view: &crate::observe::cluster_view::ClusterView,
    address_of: impl Fn(BrokerId) -> Option<String>,
) -> ShardLeaders {
    let Some(topic) = view.topics.get(OFFSETS_TOPIC) else {
        return ShardLeaders::default();
    };
    let leaders = topic
        .partitions
        .iter()
        .filter(|p| p.leader >= 0)
        .filter_map(|p| Some((p.partition, (p.leader, address_of(p.leader)?))))
        .collect();
    ShardLeaders {
        partitions: topic.partitions.len() as u32,
        leaders,
    }
}

/// Kafka's topic of committed offsets and group metadata.
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";

#[cfg(test)]
mod tests;
