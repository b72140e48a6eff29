//! Canary round trips, per partition, continuously: one acks=all record to each partition of
//! a dedicated topic (laid out so every broker leads one) every `interval`, whatever the
//! metadata round does, read back by an assigned consumer. Measures produce and end-to-end
//! latency and unavailability windows (to about a second, charged to the leader that had
//! them), and catches acknowledged writes the cluster later loses. Each metadata round brings
//! the layout, the consumer's assignment and the writer's targets up to date and collects
//! what happened since the last round. rdkafka is used on purpose: the canary sees what a
//! real client sees, retries and metadata caching included.
//!
//! This file holds the settings and the clients' lifecycle; `round.rs` the round and what it
//! reports, `produce.rs` the writer, `consumer.rs` the reader, `admin.rs` the topic's layout,
//! `view.rs` what it takes from a metadata round, `books.rs` what they share, `polled.rs` the
//! producer and the thread that serves its delivery reports, `ownership.rs` whether the
//! topic is the watchdog's to touch at all.

mod admin;
mod auth;
mod books;
mod conns;
mod consumer;
pub mod layout;
pub mod ledger;
pub mod metrics;
mod ownership;
mod polled;
mod produce;
pub mod record;
mod round;
pub mod stats;
mod view;
pub mod window;
pub mod writer;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rdkafka::admin::AdminClient;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{Consumer, StreamConsumer};
use rdkafka::error::KafkaError;
use rdkafka::producer::Producer as _;
use tokio::sync::watch;

use crate::model::supervise::{self, Task};
use crate::observe::wire::Token;

use auth::CanaryContext;
use layout::{LayoutMemory, LayoutSettings};
use stats::CanaryStats;
use writer::Target;

// The produce error kinds the verdict reads are declared with it, in a pure module.
pub use crate::model::words::AUTHORIZATION;

use books::{Books, Shared};
use consumer::read_loop;
use polled::Polled;
pub use produce::{blames_followers, charge, client_side, error_kind, slow_write, ProduceFailure};
use produce::{write_loop, Attributing};
pub use round::{CanaryRound, FailedWrites, LossEvent, PartitionRound, TopicStatus};
pub use view::{view_from, Acks1Probe, CanaryView, LeaderClaim, PartitionStateWithEpoch};

/// How the canary of one cluster runs.
#[derive(Clone)]
pub struct CanarySettings {
    pub cluster: String,
    pub topic: String,
    pub instance: String,
    pub produce_timeout: Duration,
    /// One write to every canary partition (and to every claimed leader) this often.
    pub interval: Duration,
    pub lost_after: Duration,
    pub manage_topic: bool,
    pub layout: LayoutSettings,
    /// Bootstrap, security and the operator's extra properties, shared by every client.
    pub client: ClientConfig,
    /// Also write acks=1 records straight to every broker that claims a leadership.
    pub acks1_probe: bool,
    /// How to reach one broker directly, for the acks=1 probe and layout changes.
    pub wire: crate::observe::wire::WireOptions,
}

struct Clients {
    consumer: Arc<StreamConsumer<CanaryContext>>,
    /// Kept for its token; the writer has its own handle.
    producer: Arc<Polled<Attributing>>,
    admin: AdminClient<CanaryContext>,
    context: CanaryContext,
    /// What the writer writes to; an empty plan writes nothing.
    plan: watch::Sender<Vec<Target>>,
    reader: tokio::task::JoinHandle<()>,
    writer: tokio::task::JoinHandle<()>,
}

impl Drop for Clients {
    fn drop(&mut self) {
        self.reader.abort();
        self.writer.abort();
    }
}

pub struct Canary {
    settings: CanarySettings,
    clients: Option<Clients>,
    shared: Arc<Shared>,
    layout: LayoutMemory,
    assigned: BTreeSet<i32>,
    epochs: BTreeMap<i32, i32>,
    /// Whether the topic is the watchdog's (see `ownership`), decided once each time it
    /// appears; None while it does not exist or could not be told.
    ownership: Option<ownership::Ownership>,
    /// The credentials' generation (`credentials_generation`) the clients were made with.
    credentials: u64,
}

fn config_error(e: KafkaError) -> TopicStatus {
    TopicStatus::Broken(format!("cannot create the canary's Kafka clients: {e}"))
}

impl Canary {
    /// `stats` are the canary's cumulative metrics, shared with the metrics renderer: each
    /// write and read adds to them when it happens.
    pub fn new(settings: CanarySettings, stats: CanaryStats) -> Self {
        Canary {
            shared: Arc::new(Shared {
                books: Mutex::new(Books::new(&settings.instance, settings.lost_after)),
                stats,
                cluster: settings.cluster.clone(),
                slow: slow_write(settings.produce_timeout),
                news: Arc::new(tokio::sync::Notify::new()),
            }),
            settings,
            clients: None,
            layout: LayoutMemory::default(),
            assigned: BTreeSet::new(),
            epochs: BTreeMap::new(),
            ownership: None,
            credentials: 0,
        }
    }

    pub fn topic(&self) -> String {
        self.settings.topic.clone()
    }

    /// Woken when a canary partition's writes change how they end (working, slow, failing
    /// and how): what ails it is in the metadata, and a round should look now.
    pub fn news(&self) -> Arc<tokio::sync::Notify> {
        self.shared.news.clone()
    }

    /// Drops the clients when the credentials librdkafka reads changed since they were
    /// made: librdkafka takes the SASL password as a property and reads the CA and client
    /// certificate files when a client is made, never again for one that exists. The next
    /// clients get the password as it is now; the consumer resumes where the ledger read.
    fn renew_credentials(&mut self) {
        let now = credentials_generation(&self.settings.wire.security);
        if self.clients.is_some() && now != self.credentials {
            tracing::info!(cluster = %self.settings.cluster, "the canary's credentials changed: its Kafka clients start again with them");
            self.clients = None;
            self.assigned.clear();
        }
        if self.clients.is_none() {
            self.credentials = now;
            if let Some(sasl) = self.settings.wire.security.sasl() {
                if sasl.oauth.is_none() && sasl.aws.is_none() {
                    self.settings
                        .client
                        .set("sasl.password", sasl.password.text());
                }
            }
        }
    }

    /// The clients, made with `context` and handed `token` before they connect.
    fn start_clients(
        &self,
        context: CanaryContext,
        token: Option<&Token>,
    ) -> Result<Clients, TopicStatus> {
        let s = &self.settings;
        let ms = s.produce_timeout.as_millis().max(1).to_string();
        let producer = Polled::create(
            s.client
                .clone()
                .set("acks", "all")
                .set("enable.idempotence", "false")
                .set("retries", "0")
                .set("linger.ms", "0")
                .set("message.timeout.ms", &ms)
                .set("request.timeout.ms", &ms),
            Attributing,
        )
        .map_err(config_error)?;
        let consumer: StreamConsumer<CanaryContext> = s
            .client
            .clone()
            .set("group.id", format!("kafka-watchdog-canary-{}", s.instance))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "latest")
            // A fetch returns as soon as a record arrives; the wait only bounds how often
            // an idle consumer asks each leader (2 fetches a second, not 10).
            .set("fetch.wait.max.ms", "500")
            .set("enable.partition.eof", "false")
            .create_with_context(context.clone())
            .map_err(config_error)?;
        let admin: AdminClient<CanaryContext> = s
            .client
            .clone()
            .create_with_context(context.clone())
            .map_err(config_error)?;
        let consumer = Arc::new(consumer);
        let producer = Arc::new(producer);
        // With a token mechanism no client connects before it has its first token.
        prime_all(&context, &admin, &producer, &consumer, token).map_err(|e| {
            TopicStatus::Broken(format!("cannot authenticate the canary's clients: {e}"))
        })?;
        // Supervised: a reader or writer that ends (a panic) is started again, or the
        // canary would go on reporting rounds that no write or read feeds.
        let (c, shared) = (consumer.clone(), self.shared.clone());
        let reader = supervise::spawn(Task::CanaryReader, &s.cluster, move || {
            read_loop(c.clone(), shared.clone())
        });
        let (plan, plan_rx) = watch::channel(Vec::new());
        let (p, settings, shared) = (producer.clone(), self.settings.clone(), self.shared.clone());
        let writer = supervise::spawn(Task::CanaryWriter, &s.cluster, move || {
            write_loop(plan_rx.clone(), p.clone(), settings.clone(), shared.clone())
        });
        Ok(Clients {
            consumer,
            producer,
            admin,
            context,
            plan,
            reader,
            writer,
        })
    }
}

/// Hands every client `token` (see `CanaryContext::prime`).
fn prime_all(
    context: &CanaryContext,
    admin: &AdminClient<CanaryContext>,
    producer: &Polled<Attributing>,
    consumer: &StreamConsumer<CanaryContext>,
    token: Option<&Token>,
) -> Result<(), String> {
    context
        .prime(admin.inner(), token)
        .and_then(|()| context.prime(producer.client(), token))
        .and_then(|()| context.prime(consumer.client(), token))
}

/// How many times the credentials librdkafka reads (the CA file, the client certificate
/// and key, the SASL password) took new content; token mechanisms hand each client its
/// token at every round (`auth`) and need no new client.
fn credentials_generation(security: &crate::observe::wire::Security) -> u64 {
    let tls = security.tls();
    [
        tls.and_then(|t| t.ca_pem.as_ref()),
        tls.and_then(|t| t.client_cert.as_ref()),
        security.sasl().map(|s| &s.password),
    ]
    .into_iter()
    .flatten()
    .map(crate::config::live::Current::generation)
    .sum()
}

#[cfg(test)]
mod tests;
