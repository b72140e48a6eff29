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
//!
//! The transaction coordinators, when `coordinators.transactions` is on, likewise: one
//! synthetic transactional id per `__transaction_state` partition, and per look one empty
//! transaction of each (InitProducerId, AddOffsetsToTxn, EndTxn commit) sent to the
//! partition's leader. A coordinator whose markers are not written answers the next
//! InitProducerId CONCURRENT_TRANSACTIONS; one that is stuck does not answer. This writes to
//! `__transaction_state` and allocates one producer id per synthetic id, hence off by
//! default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::join_all;
use tokio::sync::watch;

use crate::model::coordinators::{
    group_for, CoordinatorLook, CoordinatorObservation, ShardError, ShardProbe, TxnCoordinators,
    CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
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
    /// Probe the group coordinators (`coordinators.groups`).
    pub groups: bool,
    /// The transaction coordinator probe, when it is on.
    pub transactions: Option<TxnProbeSettings>,
}

/// How to probe the transaction coordinators.
#[derive(Debug, Clone)]
pub struct TxnProbeSettings {
    /// Synthetic transactional ids are `<id_prefix>-<partition>-<n>`; the groups their
    /// transactions add, `<id_prefix>-g-<partition>-<n>`.
    pub id_prefix: String,
    /// One empty transaction per shard this often.
    pub interval: Duration,
}

/// What the probes are to look at, from the newest view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CoordinatorPlan {
    pub groups: ShardLeaders,
    pub transactions: ShardLeaders,
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
/// The codes kept per transaction shard: the coordinator's, and CONCURRENT_TRANSACTIONS
/// (the shard's last transaction has not ended).
const TXN_ERRORS: [i16; 4] = [
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    NOT_COORDINATOR,
    CONCURRENT_TRANSACTIONS,
];
/// The watchdog may not describe its own synthetic groups.
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;

/// Which coordinators a probe of shards asks, and what that takes.
#[derive(Clone, Copy)]
enum Role<'a> {
    Groups,
    /// With the group the transactions add (`None`: each id's own name).
    Transactions {
        prefix: &'a str,
        marker_group: Option<&'a str>,
    },
}

impl Role<'_> {
    fn tracked(self) -> &'static [i16] {
        match self {
            Role::Groups => &COORDINATOR_ERRORS,
            Role::Transactions { .. } => &TXN_ERRORS,
        }
    }

    fn denied(self, code: i16) -> bool {
        match self {
            Role::Groups => code == GROUP_AUTHORIZATION_FAILED,
            Role::Transactions { .. } => {
                code == GROUP_AUTHORIZATION_FAILED || code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
            }
        }
    }

    fn denied_detail(self, settings: &CoordinatorSettings) -> String {
        match self {
            Role::Groups => format!(
                "GROUP_AUTHORIZATION_FAILED: the watchdog's principal needs Describe on the groups prefixed {}",
                settings.group_prefix
            ),
            Role::Transactions { prefix, .. } => format!(
                "refused: the watchdog's principal needs Write and Describe on the transactional ids, and Read on the groups, prefixed {prefix}"
            ),
        }
    }
}

/// The most shards a probe looks at. Kafka makes `__consumer_offsets` 50 partitions by
/// default (`offsets.topic.num.partitions`; `__transaction_state` likewise), and a few
/// hundred is already rare. Finding a shard's synthetic group takes about as many tries
/// as there are shards, so the count a broker reports must be bounded before it is
/// believed: beyond this the look says so and probes nothing (issue 38 item 3).
pub const MAX_SHARDS: u32 = 1000;

/// Why a look probes nothing when `topic` reports more partitions than `MAX_SHARDS`.
fn too_many(topic: &str, partitions: u32) -> Option<String> {
    (partitions > MAX_SHARDS).then(|| {
        format!("{topic} has {partitions} partitions by the brokers' metadata, more than the {MAX_SHARDS} the probe looks at: not probed")
    })
}

/// The synthetic groups (or transactional ids) of one prefix, made once per shard and kept
/// while the partition count holds.
struct Groups {
    prefix: String,
    partitions: u32,
    names: BTreeMap<i32, String>,
}

impl Groups {
    fn new(prefix: String) -> Self {
        Groups {
            prefix,
            partitions: 0,
            names: BTreeMap::new(),
        }
    }

    fn of(&mut self, shard: i32, partitions: u32) -> String {
        if self.partitions != partitions {
            self.partitions = partitions;
            self.names.clear();
        }
        self.names
            .entry(shard)
            .or_insert_with(|| group_for(&self.prefix, shard, partitions))
            .clone()
    }
}

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
    /// Where the transaction probe's rotation through the broker's shards stands.
    turn: usize,
}

/// What a look's requests answered: their time and each id's error code, if any.
type Fetched = Result<(std::time::Duration, Vec<(String, Option<i16>)>), WireError>;

impl Target {
    /// The broker answered, or failed otherwise than by silence: its silent streak ends.
    fn heard(&mut self) {
        self.unanswered_in_a_row = 0;
        self.unanswered_since = None;
    }

    /// One look's answer, folded into the broker's silent streak and its shards' errors.
    /// A timeout counts towards the streak only when the control connection answered
    /// quickly: silent as a whole (frozen, paused) is not the coordinator's own fault.
    fn fold(
        &mut self,
        fetched: Fetched,
        asked: &[(i32, String)],
        quick: bool,
        at: SystemTime,
        role: Role<'_>,
        settings: &CoordinatorSettings,
    ) -> ShardProbe {
        match fetched {
            Ok((_, answers))
                if answers
                    .iter()
                    .any(|(_, c)| c.is_some_and(|c| role.denied(c))) =>
            {
                // Its answer proves it works; what is refused is the watchdog's access.
                self.heard();
                self.errors.clear();
                ShardProbe::Failed {
                    kind: crate::model::round::FailureKind::Authorization,
                    detail: role.denied_detail(settings),
                }
            }
            Ok((latency, answers)) => {
                self.heard();
                self.note_codes(asked, &answers, role);
                ShardProbe::Answered { latency }
            }
            Err(e) if e.kind() == crate::model::round::FailureKind::Timeout => {
                if quick {
                    self.unanswered_in_a_row += 1;
                    self.unanswered_since.get_or_insert(at);
                } else {
                    self.heard();
                }
                ShardProbe::Unanswered
            }
            Err(e) => {
                self.heard();
                ShardProbe::Failed {
                    kind: e.kind(),
                    detail: e.to_string(),
                }
            }
        }
    }

    /// Keeps each asked shard's tracked error code with since when it has held; a shard
    /// answered otherwise is answered by its coordinator (an error of another kind is
    /// about the group, not the coordinator).
    fn note_codes(
        &mut self,
        asked: &[(i32, String)],
        answers: &[(String, Option<i16>)],
        role: Role<'_>,
    ) {
        let now = SystemTime::now();
        // A broker answers with as many groups as it likes: looked up, not scanned.
        let mut by_group: std::collections::HashMap<&str, Option<i16>> =
            std::collections::HashMap::with_capacity(answers.len());
        for (g, c) in answers {
            by_group.entry(g.as_str()).or_insert(*c);
        }
        for (shard, group) in asked {
            let code = by_group.get(group.as_str()).copied().flatten();
            match code {
                Some(code) if role.tracked().contains(&code) => {
                    let e = self.errors.entry(*shard).or_insert((code, now));
                    if e.0 != code {
                        *e = (code, now);
                    }
                }
                _ => {
                    self.errors.remove(shard);
                }
            }
        }
    }
}

/// The shards one transaction look asks a broker about: the one whose turn it is, and
/// those in error (to see each error last or end). Each shard has two looks in a row: the
/// second's InitProducerId says whether the first's transaction ended (its markers written),
/// which is how a stalled marker sender shows. A broker's transaction coordinator threads
/// serve every shard it leads, so one transaction per look names a stalled broker within
/// two looks, at a fraction of the writes of one per shard (each probe transaction appends
/// three records to `__transaction_state` and a marker to `__consumer_offsets`); a shard's
/// own trouble is found within one turn round its shards.
fn txn_turn(shards: &[(i32, String)], t: &mut Target) -> Vec<(i32, String)> {
    if shards.is_empty() {
        return Vec::new();
    }
    let next = (t.turn / 2) % shards.len();
    t.turn = t.turn.wrapping_add(1);
    shards
        .iter()
        .enumerate()
        .filter(|(i, (shard, _))| *i == next || t.errors.contains_key(shard))
        .map(|(_, s)| s.clone())
        .collect()
}

/// Probes the coordinators, keeping connections and streaks between looks.
pub struct CoordinatorProber {
    settings: CoordinatorSettings,
    targets: BTreeMap<BrokerId, Target>,
    groups: Groups,
}

/// Probes the transaction coordinators, keeping connections and streaks between looks.
pub struct TxnProber {
    settings: CoordinatorSettings,
    txn: TxnProbeSettings,
    targets: BTreeMap<BrokerId, Target>,
    ids: Groups,
    /// The groups its transactions add (see `marker_group`).
    marker_groups: Groups,
}

impl CoordinatorProber {
    pub fn new(settings: CoordinatorSettings) -> Self {
        CoordinatorProber {
            groups: Groups::new(settings.group_prefix.clone()),
            settings,
            targets: BTreeMap::new(),
        }
    }

    /// The transaction probe beside this one, when it is on.
    pub fn transactions(&self) -> Option<TxnProber> {
        let txn = self.settings.transactions.clone()?;
        Some(TxnProber {
            settings: self.settings.clone(),
            ids: Groups::new(txn.id_prefix.clone()),
            marker_groups: Groups::new(format!("{}-g", txn.id_prefix)),
            txn,
            targets: BTreeMap::new(),
        })
    }

    /// The groups' look when that probe is on; an empty one saying so otherwise.
    async fn look_groups(&mut self, plan: &CoordinatorPlan) -> CoordinatorObservation {
        if self.settings.groups {
            return self.look(&plan.groups).await;
        }
        CoordinatorObservation {
            at: SystemTime::now(),
            offsets_partitions: plan.groups.partitions,
            brokers: BTreeMap::new(),
            timeout: self.settings.timeout,
            blind: Some("the group coordinator probe is off (coordinators.groups: false)".into()),
            transactions: None,
        }
    }

    /// One look at every broker that leads a shard, all at once.
    pub async fn look(&mut self, plan: &ShardLeaders) -> CoordinatorObservation {
        let at = SystemTime::now();
        if let Some(why) = too_many(OFFSETS_TOPIC, plan.partitions) {
            self.targets.clear();
            return CoordinatorObservation {
                at,
                offsets_partitions: plan.partitions,
                brokers: BTreeMap::new(),
                timeout: self.settings.timeout,
                blind: Some(why),
                transactions: None,
            };
        }
        let mut by_broker: BTreeMap<BrokerId, (String, Vec<(i32, String)>)> = BTreeMap::new();
        for (shard, (broker, address)) in &plan.leaders {
            if *shard < 0 || *shard as u32 >= plan.partitions {
                continue;
            }
            let group = self.groups.of(*shard, plan.partitions);
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
            probe_broker(
                *broker,
                address,
                shards,
                shards,
                t,
                settings,
                at,
                Role::Groups,
            )
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
            transactions: None,
        }
    }
}

impl TxnProber {
    /// The probe's cadence: each look writes, so it has its own.
    pub fn interval(&self) -> Duration {
        self.txn.interval
    }

    /// One look at the transaction coordinators: per broker, one empty transaction on the
    /// `__transaction_state` partition whose turn it is and one on each in error
    /// (`txn_turn`), brokers at once. `offsets` places each
    /// transaction's group on a `__consumer_offsets` partition the same broker leads, so
    /// that the commit's markers go nowhere else and a stall is charged to the right broker.
    pub async fn look(&mut self, plan: &ShardLeaders, offsets: &ShardLeaders) -> TxnCoordinators {
        let at = SystemTime::now();
        if let Some(why) = too_many(TRANSACTIONS_TOPIC, plan.partitions) {
            self.targets.clear();
            return TxnCoordinators {
                at,
                partitions: plan.partitions,
                brokers: BTreeMap::new(),
                blind: Some(why),
            };
        }
        let mut by_broker: BTreeMap<BrokerId, (String, Vec<(i32, String)>)> = BTreeMap::new();
        for (shard, (broker, address)) in &plan.leaders {
            if *shard < 0 || *shard as u32 >= plan.partitions {
                continue;
            }
            let id = self.ids.of(*shard, plan.partitions);
            by_broker
                .entry(*broker)
                .or_insert_with(|| (address.clone(), Vec::new()))
                .1
                .push((*shard, id));
        }
        self.targets.retain(|b, _| by_broker.contains_key(b));
        for b in by_broker.keys() {
            self.targets.entry(*b).or_default();
        }
        let groups: BTreeMap<BrokerId, Option<String>> = by_broker
            .keys()
            .map(|b| (*b, marker_group(&mut self.marker_groups, *b, offsets)))
            .collect();
        let (txn, settings) = (&self.txn, &self.settings);
        let asked: BTreeMap<BrokerId, Vec<(i32, String)>> = self
            .targets
            .iter_mut()
            .map(|(broker, t)| (*broker, txn_turn(&by_broker[broker].1, t)))
            .collect();
        let probes = self.targets.iter_mut().map(|(broker, t)| {
            let (address, shards) = &by_broker[broker];
            let role = Role::Transactions {
                prefix: &txn.id_prefix,
                marker_group: groups[broker].as_deref(),
            };
            probe_broker(
                *broker,
                address,
                shards,
                &asked[broker],
                t,
                settings,
                at,
                role,
            )
        });
        let brokers = join_all(probes)
            .await
            .into_iter()
            .map(|l| (l.broker, l))
            .collect();
        TxnCoordinators {
            at,
            partitions: plan.partitions,
            brokers,
            blind: (plan.partitions == 0).then(|| {
                "__transaction_state does not exist yet (no transactional producer has used the cluster): no transaction coordinator to probe".to_string()
            }),
        }
    }
}

/// The group a broker's probe transactions add: one on a `__consumer_offsets` partition
/// the broker leads, when it leads one (and the probe would look at that many).
fn marker_group(groups: &mut Groups, broker: BrokerId, offsets: &ShardLeaders) -> Option<String> {
    if offsets.partitions > MAX_SHARDS {
        return None;
    }
    let shard = offsets
        .leaders
        .iter()
        .find(|(s, (b, _))| *b == broker && (**s as u32) < offsets.partitions)?
        .0;
    Some(groups.of(*shard, offsets.partitions))
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

/// One empty transaction per id, in turn, each within the probe's deadline; the first
/// that is not answered in time ends the look. Each id's first error code, if any.
async fn transact(
    slot: &mut Option<BrokerClient>,
    address: &str,
    ids: &[String],
    marker_group: Option<&str>,
    settings: &CoordinatorSettings,
) -> Result<(std::time::Duration, Vec<(String, Option<i16>)>), WireError> {
    let started = tokio::time::Instant::now();
    let client = connected(slot, address, &settings.wire).await?;
    let mut answers = Vec::with_capacity(ids.len());
    for id in ids {
        let answer = client
            .run_empty_transaction(id, marker_group, settings.timeout)
            .await?;
        answers.push((id.clone(), answer.value));
    }
    Ok((started.elapsed(), answers))
}

/// Asks `broker` about the `asked` ones of the `shards` it leads.
#[allow(clippy::too_many_arguments)]
async fn probe_broker(
    broker: BrokerId,
    address: &str,
    shards: &[(i32, String)],
    asked: &[(i32, String)],
    t: &mut Target,
    settings: &CoordinatorSettings,
    at: SystemTime,
    role: Role<'_>,
) -> CoordinatorLook {
    let ids: Vec<String> = asked.iter().map(|(_, g)| g.clone()).collect();
    let Target {
        client, control, ..
    } = t;
    let control_ping = async {
        let c = connected(control, address, &settings.wire).await?;
        c.ping().await
    };
    let answer = async {
        match role {
            Role::Groups => fetch(client, address, &ids, settings).await,
            Role::Transactions { marker_group, .. } => {
                transact(client, address, &ids, marker_group, settings).await
            }
        }
    };
    let (fetched, pinged) = futures::join!(answer, control_ping);
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
    let last = t.fold(fetched, asked, quick, at, role, settings);
    let led: std::collections::BTreeSet<i32> = shards.iter().map(|(s, _)| *s).collect();
    t.errors.retain(|s, _| led.contains(s));
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
/// cluster loop last said who leads, and publishes each look. The task is supervised: one
/// that ends (a panic) is started again, with the same channels.
pub struct CoordinatorWatch {
    looks: watch::Receiver<Option<Arc<CoordinatorObservation>>>,
    /// `None` until the first round said who leads what.
    plan: watch::Sender<Option<CoordinatorPlan>>,
    task: tokio::task::JoinHandle<()>,
}

impl CoordinatorWatch {
    pub fn start(settings: CoordinatorSettings) -> Self {
        let (tx, looks) = watch::channel(None);
        let publish = Arc::new(tx);
        let (plan, plan_rx) = watch::channel(None);
        let cluster = settings.cluster.clone();
        let task = crate::model::supervise::spawn(
            crate::model::supervise::Task::CoordinatorWatch,
            cluster,
            move || {
                look_task(
                    CoordinatorProber::new(settings.clone()),
                    settings.interval,
                    publish.clone(),
                    plan_rx.clone(),
                )
            },
        );
        CoordinatorWatch { looks, plan, task }
    }

    /// Who leads the shards from now on.
    pub fn plan(&self, leaders: CoordinatorPlan) {
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

async fn look_task(
    mut prober: CoordinatorProber,
    interval: Duration,
    publish: Arc<watch::Sender<Option<Arc<CoordinatorObservation>>>>,
    mut plan_rx: watch::Receiver<Option<CoordinatorPlan>>,
) {
    let mut next = tokio::time::Instant::now();
    let mut txn_next = tokio::time::Instant::now();
    let mut txn_prober = prober.transactions();
    let mut transactions: Option<TxnCoordinators> = None;
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
        let due = txn_prober
            .as_mut()
            .filter(|_| tokio::time::Instant::now() >= txn_next);
        // The transactions' cadence is their own (each one writes); their newest look
        // rides along with every look at the groups. The two use connections of their
        // own and run at once.
        let (mut look, txn_look) = match due {
            Some(t) => {
                txn_next = tokio::time::Instant::now() + t.interval();
                let (groups, txns) = futures::join!(
                    prober.look_groups(&plan),
                    t.look(&plan.transactions, &plan.groups)
                );
                (groups, Some(txns))
            }
            None => (prober.look_groups(&plan).await, None),
        };
        if let Some(t) = txn_look {
            transactions = Some(t);
        }
        look.transactions = transactions.clone();
        publish.send_replace(Some(Arc::new(look)));
    }
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
    leaders_of(OFFSETS_TOPIC, view, address_of)
}

/// Both probes' shards in a view: `__consumer_offsets`' and `__transaction_state`'s.
pub fn coordinator_plan(
    view: &crate::observe::cluster_view::ClusterView,
    address_of: impl Fn(BrokerId) -> Option<String>,
) -> CoordinatorPlan {
    CoordinatorPlan {
        groups: leaders_of(OFFSETS_TOPIC, view, &address_of),
        transactions: leaders_of(TRANSACTIONS_TOPIC, view, &address_of),
    }
}

fn leaders_of(
    topic: &str,
    view: &crate::observe::cluster_view::ClusterView,
    address_of: impl Fn(BrokerId) -> Option<String>,
) -> ShardLeaders {
    let Some(topic) = view.topics.get(topic) else {
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
/// Kafka's topic of transaction states.
pub const TRANSACTIONS_TOPIC: &str = "__transaction_state";

#[cfg(test)]
mod tests;
