//! The lab's shape: which nodes exist, where they listen, and the server.properties each
//! one runs with.
//!
//! KRaft (Kafka 4): one dedicated controller (node 0) plus broker-only nodes 1..=N. With three
//! combined broker+controller nodes, killing two loses the quorum and metadata freezes, so a
//! leaderless partition (incident 1) would never be observable; a dedicated controller keeps
//! the quorum alive whatever happens to the brokers. `--controllers 3` (or 5) adds dedicated
//! controllers 100, 101, ... (127.0.0.110, ...), a real Raft quorum whose active controller
//! can be frozen or wedged while the others elect another: their ids stay clear of the
//! broker ids 1..=9, so every broker keeps its id and address whatever the quorum's size.
//! ZooKeeper (Kafka 3.9): one ZooKeeper (node 0) plus brokers 1..=N; one broker is elected
//! controller through ZooKeeper, as in the seed incidents.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// The node id of the KRaft controller or of ZooKeeper.
pub const QUORUM_NODE: i32 = 0;
/// The id of the second KRaft controller, when the lab has more than one; the others
/// follow it (101, 102, ...).
pub const EXTRA_CONTROLLER_BASE: i32 = 100;
/// Controllers a lab can have: Raft needs an odd number to tolerate a loss, and five
/// tolerates two.
pub const MAX_CONTROLLERS: u32 = 5;
/// Client listener port on every broker.
pub const CLIENT_PORT: u16 = 9092;
/// Inter-broker (replication) listener port on every broker.
pub const REPLICATION_PORT: u16 = 9091;
/// KRaft controller listener port.
pub const CONTROLLER_PORT: u16 = 9093;
/// ZooKeeper client port.
pub const ZOOKEEPER_PORT: u16 = 2181;
/// SASL_SSL client listener port, when the lab runs with `--security sasl_ssl`.
pub const SASL_SSL_PORT: u16 = 9192;

/// A Kafka release the lab runs. The serde names are the lab state file's and `--kafka`'s
/// spellings: "4" and "3.9" predate the others and keep their meaning (4.1.1 KRaft, 3.9.1
/// ZooKeeper).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum KafkaVersion {
    /// Apache Kafka 2.8.2 in ZooKeeper mode: the oldest release with DescribeCluster.
    #[serde(rename = "2.8")]
    V2_8,
    /// Apache Kafka 3.6.2 in ZooKeeper mode.
    #[serde(rename = "3.6")]
    V3_6,
    /// Apache Kafka 3.6.2 in KRaft mode (no DescribeCluster v2, no ELR).
    #[serde(rename = "3.6-kraft")]
    V3_6Kraft,
    /// Apache Kafka 3.9 in ZooKeeper mode.
    #[serde(rename = "3.9")]
    V3_9,
    /// Apache Kafka 4.1 in KRaft mode.
    #[serde(rename = "4")]
    V4,
    /// Apache Kafka 4.4 in KRaft mode, the newest release on Maven Central.
    #[serde(rename = "4.4")]
    V4_4,
}

impl KafkaVersion {
    /// Every release the lab runs, oldest first: the compatibility matrix.
    pub const ALL: [KafkaVersion; 6] = [
        KafkaVersion::V2_8,
        KafkaVersion::V3_6,
        KafkaVersion::V3_6Kraft,
        KafkaVersion::V3_9,
        KafkaVersion::V4,
        KafkaVersion::V4_4,
    ];

    /// The release `kafka-lab up` and the tests use when none is named: the newest the lab
    /// runs. 4.4.0 took over from 4.1.1 once the whole suite passed on it; `--kafka 4` keeps
    /// meaning 4.1.1.
    pub const DEFAULT: KafkaVersion = KafkaVersion::V4_4;

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "2.8" | "2.8.2" => Some(KafkaVersion::V2_8),
            "3.6" | "3.6.2" | "3.6-zk" | "3.6.2-zk" => Some(KafkaVersion::V3_6),
            "3.6-kraft" | "3.6.2-kraft" => Some(KafkaVersion::V3_6Kraft),
            "3.9" | "3.9.1" => Some(KafkaVersion::V3_9),
            "4" | "4.1" | "4.1.1" => Some(KafkaVersion::V4),
            "4.4" | "4.4.0" => Some(KafkaVersion::V4_4),
            _ => None,
        }
    }

    /// The spelling `parse` and the state file use.
    pub const fn name(self) -> &'static str {
        match self {
            KafkaVersion::V2_8 => "2.8",
            KafkaVersion::V3_6 => "3.6",
            KafkaVersion::V3_6Kraft => "3.6-kraft",
            KafkaVersion::V3_9 => "3.9",
            KafkaVersion::V4 => "4",
            KafkaVersion::V4_4 => "4.4",
        }
    }

    /// "2.8.2 (ZooKeeper)", for tables and messages.
    pub fn label(self) -> String {
        let mode = if self.is_kraft() {
            "KRaft"
        } else {
            "ZooKeeper"
        };
        format!("{} ({mode})", self.maven_version())
    }

    pub fn maven_version(self) -> &'static str {
        match self {
            KafkaVersion::V2_8 => "2.8.2",
            KafkaVersion::V3_6 | KafkaVersion::V3_6Kraft => "3.6.2",
            KafkaVersion::V3_9 => "3.9.1",
            KafkaVersion::V4 => "4.1.1",
            KafkaVersion::V4_4 => "4.4.0",
        }
    }

    pub fn is_kraft(self) -> bool {
        matches!(
            self,
            KafkaVersion::V4 | KafkaVersion::V4_4 | KafkaVersion::V3_6Kraft
        )
    }

    /// Kafka 4 logs through log4j2; 2.x and 3.x through log4j 1 (reload4j).
    pub fn uses_log4j2(self) -> bool {
        matches!(self, KafkaVersion::V4 | KafkaVersion::V4_4)
    }

    /// kafka-storage's `--feature` (3.8+): the lab pins Eligible Leader Replicas with it.
    pub fn formats_with_features(self) -> bool {
        matches!(self, KafkaVersion::V4 | KafkaVersion::V4_4)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Security {
    Plaintext,
    SaslSsl,
    /// OAUTHBEARER on a SASL_PLAINTEXT listener, tokens from the lab's endpoint (oauth.rs).
    SaslOauthbearer,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    Controller,
    ZooKeeper,
    Broker,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Controller => "controller",
            Role::ZooKeeper => "zookeeper",
            Role::Broker => "broker",
        }
    }
}

/// The KRaft controller ids of a lab with `count` controllers: node 0 first, as in the
/// one-controller lab, then 100, 101, ...
pub fn controller_ids(count: u32) -> Vec<i32> {
    (0..count.max(1) as i32)
        .map(|k| {
            if k == 0 {
                QUORUM_NODE
            } else {
                EXTRA_CONTROLLER_BASE + k - 1
            }
        })
        .collect()
}

/// Every node id a lab can have (brokers 0..=9 and every possible controller), for the
/// cleanup of users and CPU groups, which must work without a state file.
pub fn all_node_ids() -> impl Iterator<Item = i32> {
    (0..=9).chain(controller_ids(MAX_CONTROLLERS).into_iter().skip(1))
}

/// `controller.quorum.voters`: `id@host:port` of each controller.
pub fn quorum_voters(controllers: &[i32]) -> String {
    controllers
        .iter()
        .map(|id| format!("{id}@{}:{CONTROLLER_PORT}", host(*id)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Loopback address of a node: 127.0.0.10 for the quorum node, 127.0.0.1N for broker N,
/// 127.0.0.110 and up for the extra controllers.
pub fn host(node: i32) -> String {
    format!("127.0.0.{}", 10 + node)
}

/// The Unix user a node runs as, so that packet filter rules can tell nodes apart by owner:
/// on loopback every connection comes from 127.0.0.1, whatever address it targets.
pub fn user(node: i32) -> String {
    format!("kafkalab{node}")
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NodeSpec {
    pub id: i32,
    pub role: Role,
    pub host: String,
    /// The port clients (or brokers, for the quorum node) connect to.
    pub port: u16,
}

pub fn nodes(version: KafkaVersion, brokers: u32) -> Vec<NodeSpec> {
    nodes_with(version, 1, brokers)
}

/// The nodes of a lab with `controllers` KRaft controllers (ZooKeeper labs have one
/// ZooKeeper whatever is asked), controllers first.
pub fn nodes_with(version: KafkaVersion, controllers: u32, brokers: u32) -> Vec<NodeSpec> {
    let mut all: Vec<NodeSpec> = if version.is_kraft() {
        controller_ids(controllers)
            .into_iter()
            .map(controller_spec)
            .collect()
    } else {
        vec![NodeSpec {
            id: QUORUM_NODE,
            role: Role::ZooKeeper,
            host: host(QUORUM_NODE),
            port: ZOOKEEPER_PORT,
        }]
    };
    all.extend((1..=brokers as i32).map(broker_spec));
    all
}

pub fn controller_spec(id: i32) -> NodeSpec {
    NodeSpec {
        id,
        role: Role::Controller,
        host: host(id),
        port: CONTROLLER_PORT,
    }
}

pub fn broker_spec(id: i32) -> NodeSpec {
    NodeSpec {
        id,
        role: Role::Broker,
        host: host(id),
        port: CLIENT_PORT,
    }
}

/// Settings that make faults visible within seconds instead of the production minutes,
/// and keep four JVMs within two cores and a few hundred MiB each.
const FAST_FAILURE: &[(&str, &str)] = &[
    ("replica.lag.time.max.ms", "5000"),
    ("replica.socket.timeout.ms", "5000"),
    ("controller.socket.timeout.ms", "5000"),
    ("auto.leader.rebalance.enable", "false"),
    ("group.initial.rebalance.delay.ms", "0"),
    ("num.network.threads", "2"),
    ("num.io.threads", "8"),
    ("num.replica.fetchers", "1"),
    ("background.threads", "2"),
    ("log.cleaner.threads", "1"),
    ("log.cleaner.dedupe.buffer.size", "16777216"),
    ("offsets.topic.num.partitions", "3"),
    ("offsets.topic.replication.factor", "3"),
    ("transaction.state.log.replication.factor", "3"),
    ("transaction.state.log.min.isr", "2"),
    ("num.partitions", "1"),
    ("default.replication.factor", "3"),
    ("log.segment.bytes", "16777216"),
    ("log.retention.ms", "3600000"),
    ("unclean.leader.election.enable", "false"),
];

/// What a SASL_SSL client listener needs in a broker's config.
pub struct SecureListener {
    pub keystore: String,
    pub keystore_password: String,
    pub watchdog_password: String,
}

/// Kafka's own authorizer. Only the SASL_SSL listener authenticates users; everything on
/// the plaintext listeners (the test harness, replication, the controller) is ANONYMOUS,
/// made a super user, so ACLs bind the watchdog's user and nothing else.
fn authorizer(set: &mut impl FnMut(&str, &str)) {
    set(
        "authorizer.class.name",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    );
    set("super.users", "User:ANONYMOUS");
    set("allow.everyone.if.no.acl.found", "false");
}

/// The server.properties of one node of a one-controller lab. `acls`: Kafka's authorizer
/// is on (SASL_SSL labs).
pub fn server_properties(
    version: KafkaVersion,
    node: &NodeSpec,
    data_dir: &str,
    secure: Option<&SecureListener>,
    acls: bool,
) -> String {
    server_properties_in(version, node, data_dir, secure, acls, &[QUORUM_NODE])
}

/// The server.properties of one node of a lab whose KRaft controllers are `controllers`
/// (a static quorum: every node names every voter).
pub fn server_properties_in(
    version: KafkaVersion,
    node: &NodeSpec,
    data_dir: &str,
    secure: Option<&SecureListener>,
    acls: bool,
    controllers: &[i32],
) -> String {
    let mut p = String::new();
    let mut set = |k: &str, v: &str| {
        let _ = writeln!(p, "{k}={v}");
    };
    let controller = format!("{}:{}", node.host, CONTROLLER_PORT);
    let voters = quorum_voters(controllers);
    match (version, node.role) {
        // ZooKeeper runs from zoo.cfg (`zookeeper_config`), never from server.properties.
        (_, Role::ZooKeeper) => {}
        (v, Role::Controller) if v.is_kraft() => {
            set("process.roles", "controller");
            set("node.id", &node.id.to_string());
            set("controller.quorum.voters", &voters);
            set("listeners", &format!("CONTROLLER://{controller}"));
            set("controller.listener.names", "CONTROLLER");
            set("listener.security.protocol.map", "CONTROLLER:PLAINTEXT");
            if acls {
                // ACLs live in the metadata log; the controller applies CreateAcls.
                authorizer(&mut set);
            }
            set("log.dirs", data_dir);
            // The controller's value is the one that fences brokers.
            set("broker.session.timeout.ms", "3000");
            set("broker.heartbeat.interval.ms", "500");
        }
        (_, Role::Broker) | (_, Role::Controller) => {
            let h = &node.host;
            let mut listeners = vec![
                format!("CLIENT://{h}:{CLIENT_PORT}"),
                format!("REPLICATION://{h}:{REPLICATION_PORT}"),
            ];
            let mut map = vec!["CLIENT:PLAINTEXT", "REPLICATION:PLAINTEXT"];
            if secure.is_some() {
                listeners.push(format!("SECURE://{h}:{SASL_SSL_PORT}"));
                map.push("SECURE:SASL_SSL");
            }
            if version.is_kraft() {
                set("process.roles", "broker");
                set("node.id", &node.id.to_string());
                set("controller.quorum.voters", &voters);
                set("controller.listener.names", "CONTROLLER");
                map.push("CONTROLLER:PLAINTEXT");
                set("broker.session.timeout.ms", "3000");
                set("broker.heartbeat.interval.ms", "500");
            } else {
                set("broker.id", &node.id.to_string());
                set(
                    "zookeeper.connect",
                    &format!("{}:{ZOOKEEPER_PORT}", host(QUORUM_NODE)),
                );
                set("zookeeper.session.timeout.ms", "6000");
                set("zookeeper.connection.timeout.ms", "6000");
            }
            set("listeners", &listeners.join(","));
            set("advertised.listeners", &listeners.join(","));
            set("listener.security.protocol.map", &map.join(","));
            set("inter.broker.listener.name", "REPLICATION");
            set("log.dirs", data_dir);
            set("broker.rack", &format!("rack{}", node.id));
            for (k, v) in FAST_FAILURE {
                set(k, v);
            }
            if acls {
                authorizer(&mut set);
            }
            if let Some(sec) = secure {
                set("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-512");
                set(
                    "listener.name.secure.plain.sasl.jaas.config",
                    &format!(
                        "org.apache.kafka.common.security.plain.PlainLoginModule required user_{}=\"{}\";",
                        crate::secrets::WATCHDOG_USER,
                        sec.watchdog_password
                    ),
                );
                set(
                    "listener.name.secure.scram-sha-512.sasl.jaas.config",
                    "org.apache.kafka.common.security.scram.ScramLoginModule required;",
                );
                set("ssl.keystore.type", "PKCS12");
                set("ssl.keystore.location", &sec.keystore);
                set("ssl.keystore.password", &sec.keystore_password);
                set("ssl.key.password", &sec.keystore_password);
            }
        }
    }
    p
}

/// zoo.cfg of the ZooKeeper node (Kafka 3.9 labs). tickTime 500 lets sessions of 6 s expire fast.
pub fn zookeeper_config(data_dir: &str) -> String {
    format!(
        "tickTime=500\ninitLimit=10\nsyncLimit=5\ndataDir={data_dir}\nclientPort={ZOOKEEPER_PORT}\n\
         clientPortAddress={}\nadmin.enableServer=false\nmaxClientCnxns=0\n\
         4lw.commands.whitelist=ruok,stat,srvr\n",
        host(QUORUM_NODE)
    )
}

/// log4j2 configuration for Kafka 4: everything to stdout, which the lab sends to server.log.
pub const LOG4J2: &str = "\
status = warn
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.out.ref = OUT
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
";

/// reload4j configuration for Kafka 3.9 and ZooKeeper.
pub const LOG4J1: &str = "\
log4j.rootLogger=INFO, out
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.org.apache.kafka.clients=WARN
log4j.logger.org.apache.zookeeper=WARN
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_version_parses_back_from_its_name_and_old_spellings_keep_their_meaning() {
        for v in KafkaVersion::ALL {
            assert_eq!(KafkaVersion::parse(v.name()), Some(v), "{v:?}");
            assert_eq!(
                KafkaVersion::parse(v.maven_version()).map(|p| p.maven_version()),
                Some(v.maven_version())
            );
            let json = serde_json::to_string(&v).unwrap();
            assert_eq!(json, format!("\"{}\"", v.name()));
        }
        // State files and scripts written before the matrix.
        assert_eq!(
            serde_json::from_str::<KafkaVersion>("\"4\"").unwrap(),
            KafkaVersion::V4
        );
        assert_eq!(
            serde_json::from_str::<KafkaVersion>("\"3.9\"").unwrap(),
            KafkaVersion::V3_9
        );
        assert_eq!(KafkaVersion::parse("4.1").unwrap().maven_version(), "4.1.1");
        assert!(!KafkaVersion::parse("3.6").unwrap().is_kraft());
        assert!(KafkaVersion::parse("3.6-kraft").unwrap().is_kraft());
        assert!(KafkaVersion::parse("3.7").is_none());
    }

    #[test]
    fn kraft_controllers_of_every_release_get_a_static_quorum_and_zookeeper_brokers_none() {
        let controller = &nodes(KafkaVersion::V3_6Kraft, 3)[0];
        let p = server_properties(KafkaVersion::V3_6Kraft, controller, "/d", None, false);
        assert!(p.contains("process.roles=controller"), "{p}");
        assert!(
            p.contains("controller.quorum.voters=0@127.0.0.10:9093"),
            "{p}"
        );
        let broker = broker_spec(1);
        let p = server_properties(KafkaVersion::V2_8, &broker, "/d", None, false);
        assert!(p.contains("zookeeper.connect=127.0.0.10:2181"), "{p}");
        assert!(!p.contains("process.roles"), "{p}");
    }

    #[test]
    fn one_controller_is_todays_layout_and_three_add_controllers_100_and_101() {
        assert_eq!(controller_ids(1), vec![0]);
        assert_eq!(controller_ids(3), vec![0, 100, 101]);
        // A one-controller lab is exactly what `nodes` always gave.
        assert_eq!(
            nodes_with(KafkaVersion::V4_4, 1, 3),
            nodes(KafkaVersion::V4_4, 3)
        );
        let three = nodes_with(KafkaVersion::V4_4, 3, 3);
        let shape: Vec<(i32, Role, &str, u16)> = three
            .iter()
            .map(|n| (n.id, n.role, n.host.as_str(), n.port))
            .collect();
        assert_eq!(
            shape,
            vec![
                (0, Role::Controller, "127.0.0.10", 9093),
                (100, Role::Controller, "127.0.0.110", 9093),
                (101, Role::Controller, "127.0.0.111", 9093),
                (1, Role::Broker, "127.0.0.11", 9092),
                (2, Role::Broker, "127.0.0.12", 9092),
                (3, Role::Broker, "127.0.0.13", 9092),
            ]
        );
        // ZooKeeper labs have one ZooKeeper, whatever is asked.
        let zk = nodes_with(KafkaVersion::V3_9, 3, 3);
        assert_eq!(zk.iter().filter(|n| n.role != Role::Broker).count(), 1);
        // The cleanup reaches every id a lab can have, broker or controller.
        let all: Vec<i32> = all_node_ids().collect();
        for id in three
            .iter()
            .map(|n| n.id)
            .chain(controller_ids(MAX_CONTROLLERS))
        {
            assert!(all.contains(&id), "{id} missing from {all:?}");
        }
    }

    #[test]
    fn every_node_of_a_three_controller_lab_names_every_voter_and_controllers_listen_on_their_own_address(
    ) {
        let ids = controller_ids(3);
        let voters =
            "controller.quorum.voters=0@127.0.0.10:9093,100@127.0.0.110:9093,101@127.0.0.111:9093";
        for v in [
            KafkaVersion::V4_4,
            KafkaVersion::V4,
            KafkaVersion::V3_6Kraft,
        ] {
            for node in nodes_with(v, 3, 3) {
                let p = server_properties_in(v, &node, "/d", None, false, &ids);
                assert!(p.contains(voters), "{v:?} node {}: {p}", node.id);
                assert!(p.contains(&format!("node.id={}\n", node.id)), "{p}");
                match node.role {
                    Role::Controller => {
                        assert!(p.contains("process.roles=controller"), "{p}");
                        assert!(
                            p.contains(&format!("listeners=CONTROLLER://{}:9093\n", node.host)),
                            "{p}"
                        );
                        // The controllers fence brokers: their session timeout is the one
                        // that counts.
                        assert!(p.contains("broker.session.timeout.ms=3000"), "{p}");
                    }
                    _ => {
                        assert!(p.contains("process.roles=broker"), "{p}");
                        assert!(!p.contains("CONTROLLER://"), "{p}");
                    }
                }
            }
        }
        // The one-controller form is unchanged.
        let broker = broker_spec(2);
        assert_eq!(
            server_properties(KafkaVersion::V4_4, &broker, "/d", None, false),
            server_properties_in(KafkaVersion::V4_4, &broker, "/d", None, false, &[0])
        );
    }
}
