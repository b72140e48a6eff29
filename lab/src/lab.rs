//! The lab: a real Apache Kafka cluster of plain JVM processes on loopback, and the faults
//! injected into it by node id.

use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::error::LabError;
use crate::secrets::Secrets;
use crate::state::{Fault, LabState, NodeRecord};
use crate::sys::{self, ProcState};
use crate::topology::{self, KafkaVersion, NodeSpec, Role, Security};
use crate::{cpu, dist, logdirs, netfault, stall};

/// How long `up` waits for every broker to register.
const READY_TIMEOUT: Duration = Duration::from_secs(150);
/// How often `up` starts again a node that exits while starting.
const RESTARTS: u32 = 3;
/// How long a controlled shutdown may take before `stop` gives up.
const STOP_TIMEOUT: Duration = Duration::from_secs(90);
/// How long `fill` waits for Kafka to take the full directory offline. The write `fill`
/// makes fails at once; without it the broker's own checkpoint writes find it within
/// replica.high.watermark.checkpoint.interval.ms (5 s) when the directory holds a
/// partition, log.flush.offset.checkpoint.interval.ms (60 s) at the latest.
const FILL_NOTICE_TIMEOUT: Duration = Duration::from_secs(75);

/// The lab's working folder; every node's config, data and log live below it. It must be
/// reachable by the per-node users, hence /tmp rather than a home folder.
pub fn lab_dir() -> PathBuf {
    std::env::var_os("KAFKA_LAB_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/kafka-lab"))
}

#[derive(Debug, Clone)]
pub struct UpOptions {
    pub version: KafkaVersion,
    pub security: Security,
    pub brokers: u32,
    /// Dedicated KRaft controllers (1 to `topology::MAX_CONTROLLERS`): node 0, then 100,
    /// 101, ... ZooKeeper labs have one ZooKeeper whatever this says.
    pub controllers: u32,
    /// How long the brokers' certificates are valid, in days from `up` (SASL_SSL labs; the
    /// others ignore it). `secrets::DEFAULT_CERT_DAYS` unless set.
    pub cert_days: u32,
    /// Log directories per broker: 1 (the default), or 2, the second a tmpfs of
    /// `logdirs::SMALL_DIR_MIB` that `Lab::fill` makes full.
    pub log_dirs: u32,
}

impl Default for UpOptions {
    fn default() -> Self {
        UpOptions {
            version: KafkaVersion::DEFAULT,
            security: Security::Plaintext,
            brokers: 3,
            controllers: 1,
            cert_days: crate::secrets::DEFAULT_CERT_DAYS,
            log_dirs: 1,
        }
    }
}

impl UpOptions {
    /// How many nodes hold the quorum: the controllers, or one ZooKeeper.
    pub fn version_quorum_size(&self) -> u32 {
        if self.version.is_kraft() {
            self.controllers.max(1)
        } else {
            1
        }
    }
}

/// How one node is doing, for `status`.
#[derive(Debug, Clone)]
pub struct NodeStatus {
    pub id: i32,
    pub role: Role,
    pub address: String,
    pub pid: Option<u32>,
    pub state: &'static str,
    pub faults: Vec<String>,
    /// A KRaft controller that leads the quorum, as the last DescribeQuorum said.
    pub active: bool,
}

/// What `Lab::fill` did and what Kafka made of it.
#[derive(Debug, Clone)]
pub struct Filled {
    /// The directory made full: the broker's second log directory, a tmpfs.
    pub dir: PathBuf,
    /// The bytes the filler took (nothing was left).
    pub filler_bytes: u64,
    /// The partitions in that directory (`topic-partition`), which Kafka takes offline on
    /// this broker.
    pub partitions: Vec<String>,
    /// The partition written to once the directory was full (`kafka-lab-fill-<id>-<p>`),
    /// and the error its write got (None: acknowledged).
    pub written: String,
    pub write_error: Option<String>,
    /// From the filler's last byte to the broker's "Stopping serving logs in dir" line.
    pub offline_after: Duration,
}

/// An exclusive lock over lab mutations, so that a CLI call and a test never interleave.
struct LabLock {
    _file: fs::File,
}

impl LabLock {
    fn take(dir: &Path) -> Result<Self, LabError> {
        Ok(LabLock {
            // Not `<dir>.lock`: that name is the gate developers hold around whole lab
            // sessions (`flock /tmp/kafka-lab.lock ...`), which this lock under it must
            // not wait on.
            _file: locked(&dir.with_extension("mutation.lock"), None)?,
        })
    }
}

/// Opens `path` (creating it) and takes an exclusive flock on it, blocking until the holder
/// lets go; `waiting` is said once first when someone holds it.
fn locked(path: &Path, waiting: Option<&str>) -> Result<fs::File, LabError> {
    use std::os::fd::AsRawFd;
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)
        .map_err(|e| LabError::io(path, e))?;
    let fd = file.as_raw_fd();
    // SAFETY: flock on an fd we own.
    let free = unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } == 0;
    if !free {
        if let Some(w) = waiting {
            eprintln!("kafka-lab: {w} ({}); waiting", path.display());
        }
        // SAFETY: as above, blocking this time.
        if unsafe { libc::flock(fd, libc::LOCK_EX) } != 0 {
            return Err(LabError::io(path, std::io::Error::last_os_error()));
        }
    }
    Ok(file)
}

/// Exclusive use of the lab for a whole test or benchmark, across processes: test binaries,
/// benchmarks and developers' worktrees share one set of loopback addresses and one
/// `lab_dir()`, so two of them injecting faults at once would read each other's faults.
/// Held for as long as the value lives; `LabLock` (above) only guards single mutations.
pub struct SessionLock {
    _file: fs::File,
}

impl SessionLock {
    /// Blocks until no other session holds the lab.
    pub fn take() -> Result<Self, LabError> {
        let path = lab_dir().with_extension("session.lock");
        Ok(SessionLock {
            _file: locked(&path, Some("another test or benchmark holds the lab"))?,
        })
    }
}

pub struct Lab {
    dir: PathBuf,
    state: LabState,
}

impl Lab {
    /// The running lab, or `NotUp`.
    pub fn open() -> Result<Lab, LabError> {
        let dir = lab_dir();
        let state = LabState::load(&dir)?.ok_or(LabError::NotUp)?;
        Ok(Lab { dir, state })
    }

    /// Brings the cluster up, or makes sure the running one is complete (idempotent).
    pub fn up(opts: &UpOptions) -> Result<Lab, LabError> {
        if !(1..=2).contains(&opts.log_dirs) {
            return Err(LabError::Invalid(format!(
                "--log-dirs {}: expected 1 or 2",
                opts.log_dirs
            )));
        }
        if opts.log_dirs > 1 && opts.version == KafkaVersion::V3_6Kraft {
            return Err(LabError::Invalid(
                "--log-dirs 2: KRaft brokers have several log directories (JBOD) from Kafka 3.7; \
                 use 4.4, 4 or a ZooKeeper release"
                    .into(),
            ));
        }
        if opts.security == Security::SaslSsl && !opts.version.is_kraft() {
            return Err(LabError::Invalid(
                "--security sasl_ssl needs Kafka 4 (KRaft): SCRAM users are created at format time"
                    .into(),
            ));
        }
        let dir = lab_dir();
        fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
        set_mode(&dir, 0o755)?;
        let _lock = LabLock::take(&dir)?;
        let mut lab = match LabState::load(&dir)? {
            Some(state) => {
                let lab = Lab { dir, state };
                if !lab.is_set_up_as(opts) {
                    let certs = if lab.state.security == Security::SaslSsl {
                        format!(", certificates of {} days", lab.state.cert_days)
                    } else {
                        String::new()
                    };
                    let dirs = lab.state.log_dirs;
                    let disk = if lab.brokers_keep_logs_on_their_own_filesystems() {
                        ""
                    } else {
                        ", logs on the host's disk (an older kafka-lab set it up)"
                    };
                    return Err(LabError::Invalid(format!(
                        "a Kafka {} lab ({:?}, {} controller(s){certs}, {dirs} log dir(s) per broker{disk}) is already set up in {}; run `kafka-lab down` first",
                        lab.state.version.label(),
                        lab.state.security,
                        lab.controllers().len(),
                        lab.dir.display()
                    )));
                }
                lab
            }
            None => Lab::create(dir, opts)?,
        };
        let fresh = lab.state.nodes.iter().all(|n| n.pid.is_none());
        let libs = dist::ensure(lab.state.version)?;
        let deadline = Instant::now() + READY_TIMEOUT;
        // The quorum first, and serving: a ZooKeeper-mode broker that cannot reach ZooKeeper
        // within its connection timeout gives up and exits (seen in CI).
        for id in lab.quorum_nodes() {
            if lab.running_pid(id).is_none() {
                lab.spawn(id, &libs)?;
            }
        }
        lab.state.save(&lab.dir)?;
        lab.wait_quorum(deadline, &libs)?;
        for id in lab.brokers() {
            if lab.running_pid(id).is_none() {
                lab.spawn(id, &libs)?;
            }
        }
        lab.state.save(&lab.dir)?;
        if lab.state.security == Security::SaslOauthbearer {
            crate::oauth::ensure_endpoint(&lab.dir)?;
        }
        lab.wait_started(deadline, &libs)?;
        // ACLs live in the metadata log: granted once, when the cluster is new.
        if fresh && lab.state.security == Security::SaslSsl {
            lab.grant(&watchdog_acls(crate::secrets::WATCHDOG_USER))?;
        }
        Ok(lab)
    }

    /// Runs Kafka's AclCommand once per argument list (at once), through a plaintext
    /// listener, whose ANONYMOUS user is a super user. `--bootstrap-server` is added.
    pub fn grant(&self, acls: &[Vec<String>]) -> Result<(), LabError> {
        let libs = dist::ensure(self.state.version)?;
        let bootstrap = self.bootstrap();
        let mut children = Vec::new();
        for args in acls {
            let mut cmd = java_tool(&libs, &[], "org.apache.kafka.tools.AclCommand");
            cmd.args(["--bootstrap-server", &bootstrap]).args(args);
            children.push((args.join(" "), spawn_tool(cmd, "AclCommand")?));
        }
        wait_tools(children, "kafka-acls")
    }

    fn create(dir: PathBuf, opts: &UpOptions) -> Result<Lab, LabError> {
        check_java()?;
        let libs = dist::ensure(opts.version)?;
        let specs = topology::nodes_with(opts.version, opts.controllers, opts.brokers);
        let mut lab = Lab {
            dir,
            state: LabState {
                version: opts.version,
                security: opts.security,
                cluster_id: random_cluster_id()?,
                nodes: Vec::new(),
                cert_days: opts.cert_days,
                log_dirs: opts.log_dirs,
            },
        };
        fs::create_dir_all(&lab.dir).map_err(|e| LabError::io(&lab.dir, e))?;
        if opts.security == Security::SaslSsl {
            let brokers: Vec<(i32, String)> = specs
                .iter()
                .filter(|s| s.role == Role::Broker)
                .map(|s| (s.id, s.host.clone()))
                .collect();
            let secrets = Secrets::create_with(&lab.dir, &brokers, opts.cert_days)?;
            // Broker users must read their keystores; the lab is throw-away.
            let _ = sys::run("chmod", &["-R", "a+rX", &secrets.dir.display().to_string()]);
        }
        if opts.security == Security::SaslOauthbearer {
            crate::oauth::create(&lab.dir)?;
            let d = crate::oauth::dir(&lab.dir).display().to_string();
            let _ = sys::run("chmod", &["-R", "a+rX", &d]);
        }
        // The node list first: each node's config names every controller in it.
        lab.state.nodes = specs
            .iter()
            .cloned()
            .map(|spec| NodeRecord {
                spec,
                pid: None,
                faults: Vec::new(),
            })
            .collect();
        for spec in &specs {
            lab.prepare_node(spec)?;
        }
        lab.format(&specs, &libs)?;
        lab.state.save(&lab.dir)?;
        Ok(lab)
    }

    fn node_dir(&self, id: i32) -> PathBuf {
        self.dir.join(format!("n{id}"))
    }

    /// Broker `id`'s second log directory, a small tmpfs, in a lab with two per broker.
    pub fn small_log_dir(&self, id: i32) -> Option<PathBuf> {
        let rec = self.state.node(id).ok()?;
        (self.state.log_dirs > 1 && rec.spec.role == Role::Broker)
            .then(|| self.node_dir(id).join("data2"))
    }

    /// Node `id`'s log directories, as its `log.dirs` names them (the first also holds a
    /// KRaft node's metadata log).
    pub fn log_dir_paths(&self, id: i32) -> Vec<PathBuf> {
        let mut dirs = vec![self.node_dir(id).join("data")];
        dirs.extend(self.small_log_dir(id));
        dirs
    }

    /// Log directories per broker (`UpOptions::log_dirs`).
    pub fn log_dirs(&self) -> u32 {
        self.state.log_dirs
    }

    fn config_path(&self, id: i32, role: Role) -> PathBuf {
        let name = if role == Role::ZooKeeper {
            "zoo.cfg"
        } else {
            "server.properties"
        };
        self.node_dir(id).join(name)
    }

    /// Writes a node's folder and config, owned by the node's own user.
    fn prepare_node(&self, spec: &NodeSpec) -> Result<(), LabError> {
        let (uid, gid) = sys::ensure_user(&topology::user(spec.id))?;
        let nd = self.node_dir(spec.id);
        let data = nd.join("data");
        fs::create_dir_all(&data).map_err(|e| LabError::io(&data, e))?;
        // Mounted before the format, which writes each directory's meta.properties. Only
        // here, never at a restart: mounted over a formatted directory, a fresh tmpfs would
        // hide the broker's logs.
        if spec.role == Role::Broker {
            logdirs::mount_tmpfs(&data, logdirs::DATA_DIR_MIB, uid, gid)?;
        }
        if let Some(small) = self.small_log_dir(spec.id) {
            logdirs::mount_small(&small, uid, gid)?;
        }
        let log_dirs = self
            .log_dir_paths(spec.id)
            .iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(",");
        let secure = if self.state.security == Security::SaslSsl && spec.role == Role::Broker {
            let secrets = Secrets::load(&self.dir)?;
            if !secrets.keystore(spec.id).exists() {
                secrets.broker_keystore_valid_for(spec.id, &spec.host, self.state.cert_days)?;
                let _ = sys::run("chmod", &["-R", "a+rX", &secrets.dir.display().to_string()]);
            }
            Some(topology::SecureListener {
                keystore: secrets.keystore(spec.id).display().to_string(),
                keystore_password: secrets.keystore_password.clone(),
                watchdog_password: secrets.watchdog_password.clone(),
            })
        } else {
            None
        };
        let text = if spec.role == Role::ZooKeeper {
            topology::zookeeper_config(&data.display().to_string())
        } else {
            topology::server_properties_in(
                self.state.version,
                spec,
                &log_dirs,
                secure.as_ref(),
                self.state.security == Security::SaslSsl,
                &self.controllers_or_default(),
            )
        };
        let text = if self.state.security == Security::SaslOauthbearer && spec.role == Role::Broker
        {
            text + &crate::oauth::broker_properties(
                &self.dir,
                &spec.host,
                self.state.version.is_kraft(),
                topology::CLIENT_PORT,
                topology::REPLICATION_PORT,
            )
        } else {
            text
        };
        let cfg = self.config_path(spec.id, spec.role);
        fs::write(&cfg, text).map_err(|e| LabError::io(&cfg, e))?;
        let (log_cfg, log_text) = if self.state.version.uses_log4j2() {
            ("log4j2.properties", topology::LOG4J2)
        } else {
            ("log4j.properties", topology::LOG4J1)
        };
        let lp = nd.join(log_cfg);
        fs::write(&lp, log_text).map_err(|e| LabError::io(&lp, e))?;
        sys::chown_tree(&nd, uid, gid)
    }

    /// Formats the KRaft storage of every node with one cluster id. Eligible Leader Replicas
    /// are pinned off so an offline partition shows its last ISR the same way on every run.
    fn format(&self, specs: &[NodeSpec], libs: &Path) -> Result<(), LabError> {
        if !self.state.version.is_kraft() {
            return Ok(());
        }
        let mut children = Vec::new();
        for spec in specs {
            let (uid, gid) = sys::ensure_user(&topology::user(spec.id))?;
            use std::os::unix::process::CommandExt;
            let log4j = self.log_config_arg(spec.id);
            let mut cmd = java_tool(libs, &[log4j], "kafka.tools.StorageTool");
            cmd.arg("format")
                .arg("-t")
                .arg(&self.state.cluster_id)
                .arg("-c")
                .arg(self.config_path(spec.id, spec.role))
                .args(if self.state.version.formats_with_features() {
                    &["--feature", "eligible.leader.replicas.version=0"][..]
                } else {
                    &[]
                })
                .args(self.scram_args()?)
                .uid(uid)
                .gid(gid);
            children.push((format!("node {}", spec.id), spawn_tool(cmd, "StorageTool")?));
        }
        wait_tools(children, "kafka-storage format")
    }

    /// The JVM option pointing the node's logging at its config (log4j2 for Kafka 4, log4j 1
    /// before).
    fn log_config_arg(&self, id: i32) -> String {
        let nd = self.node_dir(id);
        if self.state.version.uses_log4j2() {
            format!(
                "-Dlog4j2.configurationFile={}",
                nd.join("log4j2.properties").display()
            )
        } else {
            format!(
                "-Dlog4j.configuration=file:{}",
                nd.join("log4j.properties").display()
            )
        }
    }

    /// SCRAM credentials go into the metadata log at format time (KRaft has no ZooKeeper to
    /// hold them).
    fn scram_args(&self) -> Result<Vec<String>, LabError> {
        if self.state.security != Security::SaslSsl {
            return Ok(Vec::new());
        }
        let secrets = Secrets::load(&self.dir)?;
        Ok(vec![
            "--add-scram".into(),
            format!(
                "SCRAM-SHA-512=[name={},password={}]",
                crate::secrets::WATCHDOG_USER,
                secrets.watchdog_password
            ),
        ])
    }

    /// Client bootstrap servers of the SASL_SSL listener, when the lab has one.
    pub fn secure_bootstrap(&self) -> Option<String> {
        (self.state.security == Security::SaslSsl).then(|| {
            self.brokers()
                .iter()
                .map(|id| format!("{}:{}", topology::host(*id), topology::SASL_SSL_PORT))
                .collect::<Vec<_>>()
                .join(",")
        })
    }

    pub fn security(&self) -> Security {
        self.state.security
    }

    fn spawn(&mut self, id: i32, libs: &Path) -> Result<(), LabError> {
        let node = self.state.node(id)?.spec.clone();
        let (uid, gid) = sys::ensure_user(&topology::user(id))?;
        let nd = self.node_dir(id);
        // Never on the disk below it: a broker would put partitions there that no fill
        // could reach (the mount goes with a reboot, the lab folder may not).
        if let Some(small) = self.small_log_dir(id) {
            logdirs::mount_small(&small, uid, gid)?;
        }
        let cfg = self.config_path(id, node.role);
        let heap = if node.role == Role::Broker {
            "-Xmx384m"
        } else {
            "-Xmx192m"
        };
        let mut args: Vec<String> = vec![
            "-Xms64m".into(),
            heap.into(),
            "-XX:+UseSerialGC".into(),
            // C1 only: four JVMs share two cores, and C2 compilation would compete with the
            // brokers' own work for minutes after start.
            "-XX:TieredStopAtLevel=1".into(),
            "-XX:MaxDirectMemorySize=128m".into(),
            "-Djava.awt.headless=true".into(),
            "-Dzookeeper.admin.enableServer=false".into(),
            format!("-Dkafka.logs.dir={}", nd.display()),
        ];
        args.push(self.log_config_arg(id));
        if self.state.security == Security::SaslOauthbearer && node.role == Role::Broker {
            args.extend(crate::oauth::jvm_args(&self.dir));
        }
        args.push("-cp".into());
        args.push(dist::classpath(libs));
        args.push(match node.role {
            Role::ZooKeeper => "org.apache.zookeeper.server.quorum.QuorumPeerMain".into(),
            _ => "kafka.Kafka".into(),
        });
        args.push(cfg.display().to_string());
        let log = nd.join("server.log");
        let pid = sys::spawn_detached(&java(), &args, uid, gid, &nd, &log)?;
        let rec = self.state.node_mut(id)?;
        rec.pid = Some(pid);
        // What is on disk (a certificate, a full directory) is still there.
        rec.faults.retain(Fault::persists);
        Ok(())
    }

    /// The pid of node `id` when its process is alive (running or frozen).
    pub fn running_pid(&self, id: i32) -> Option<u32> {
        let rec = self.state.node(id).ok()?;
        let pid = rec.pid?;
        match sys::started_state(pid, &self.marker(id)) {
            ProcState::Dead => None,
            _ => Some(pid),
        }
    }

    /// A string that appears in the node's command line and nowhere else.
    fn marker(&self, id: i32) -> String {
        self.node_dir(id).display().to_string() + "/"
    }

    /// Waits until every broker that should run is registered and unfenced.
    pub fn wait_ready(&self, timeout: Duration) -> Result<(), LabError> {
        let deadline = Instant::now() + timeout;
        // Some controller (or ZooKeeper) listens: with several controllers any one of them
        // may be the one stopped by the test that ends.
        while !self.quorum_addresses().iter().any(|q| sys::port_open(q)) {
            if Instant::now() > deadline {
                return Err(self.not_ready(timeout, "the quorum node to listen"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
        let want: Vec<i32> = self
            .brokers()
            .into_iter()
            .filter(|id| self.running_pid(*id).is_some())
            .collect();
        crate::client::wait_until(
            deadline.saturating_duration_since(Instant::now()),
            "every broker to register",
            || {
                let ids = crate::client::registered_brokers(&self.bootstrap()).ok()?;
                want.iter().all(|w| ids.contains(w)).then_some(())
            },
        )
        .map_err(|_| self.not_ready(timeout, "every broker to register"))
    }

    /// Waits until no partition is under-replicated: after a heal, a follower that was cut
    /// off rejoins its ISRs within `replica.lag.time.max.ms` of catching up, and a test that
    /// starts before then sees the last test's fault.
    pub fn wait_in_sync(&self, timeout: Duration) -> Result<(), LabError> {
        let mut last = Vec::new();
        crate::client::wait_until(timeout, "every partition's ISR to be whole", || {
            match crate::client::under_replicated(&self.bootstrap()) {
                Ok(short) if short.is_empty() => Some(()),
                Ok(short) => {
                    last = short;
                    None
                }
                Err(_) => None,
            }
        })
        .map_err(|_| LabError::Timeout {
            what: format!(
                "every partition's ISR to be whole (still short: {})",
                last.join("; ")
            ),
            secs: timeout.as_secs(),
        })
    }

    /// Waits until every quorum node serves: ZooKeeper answers `ruok` with `imok`, each
    /// KRaft controller listens.
    fn wait_quorum(&mut self, deadline: Instant, libs: &Path) -> Result<(), LabError> {
        let mut restarts: std::collections::BTreeMap<i32, u32> = Default::default();
        let zookeeper = !self.state.version.is_kraft();
        loop {
            let serving = |lab: &Self, id: i32| {
                let Ok(rec) = lab.state.node(id) else {
                    return false;
                };
                let address = format!("{}:{}", rec.spec.host, rec.spec.port);
                if zookeeper {
                    sys::zookeeper_ok(&address)
                } else {
                    sys::port_open(&address)
                }
            };
            if self.quorum_nodes().into_iter().all(|id| serving(self, id)) {
                return Ok(());
            }
            for id in self.quorum_nodes() {
                if self.running_pid(id).is_some() {
                    continue;
                }
                // Exited while starting (or the process recorded was an earlier lab's, gone
                // since): start it again, a bounded number of times, saying why.
                let cause = self.exit_cause(id);
                let n = restarts.entry(id).or_insert(0);
                if *n >= RESTARTS {
                    return Err(self.startup_failed(
                        id,
                        &format!(
                            "quorum node {id} exited while starting {RESTARTS} times; last: {cause}"
                        ),
                    ));
                }
                *n += 1;
                eprintln!(
                    "kafka-lab: quorum node {id} is not running ({cause}); starting it again ({n}/{RESTARTS})"
                );
                self.spawn(id, libs)?;
                self.state.save(&self.dir)?;
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(READY_TIMEOUT, "the quorum node to serve"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// Waits until every broker is registered, starting again (a bounded number of times)
    /// a broker whose process exited meanwhile, and saying why it exited.
    fn wait_started(&mut self, deadline: Instant, libs: &Path) -> Result<(), LabError> {
        let mut restarts: std::collections::BTreeMap<i32, u32> = Default::default();
        loop {
            let want = self.brokers();
            if let Ok(ids) = crate::client::registered_brokers(&self.bootstrap()) {
                if want.iter().all(|w| ids.contains(w)) {
                    return Ok(());
                }
            }
            for id in want {
                if self.running_pid(id).is_some() {
                    continue;
                }
                let n = restarts.entry(id).or_insert(0);
                let cause = self.exit_cause(id);
                if *n >= RESTARTS {
                    return Err(self.startup_failed(
                        id,
                        &format!(
                            "broker {id} exited during startup {RESTARTS} times; last: {cause}"
                        ),
                    ));
                }
                *n += 1;
                eprintln!(
                    "kafka-lab: broker {id} exited during startup ({cause}); starting it again ({n}/{RESTARTS})"
                );
                self.spawn(id, libs)?;
                self.state.save(&self.dir)?;
            }
            if Instant::now() > deadline {
                return Err(self.not_ready(READY_TIMEOUT, "every broker to register"));
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The last error line of a node's log, the likeliest reason it exited.
    fn exit_cause(&self, id: i32) -> String {
        let tail = self.server_log_tail(id, 200);
        tail.lines()
            .rev()
            .find(|l| l.contains("ERROR") || l.contains("FATAL") || l.contains("Exception"))
            .map(|l| l.trim().chars().take(300).collect())
            .unwrap_or_else(|| "no error in its log".into())
    }

    fn startup_failed(&self, id: i32, what: &str) -> LabError {
        LabError::Invalid(format!(
            "{what}\n--- node {id} log tail:\n{}",
            self.server_log_tail(id, 15)
        ))
    }

    fn not_ready(&self, timeout: Duration, what: &str) -> LabError {
        let mut detail = format!("timed out after {} s waiting for {what}", timeout.as_secs());
        for n in &self.state.nodes {
            let tail = self.server_log_tail(n.spec.id, 5);
            detail.push_str(&format!("\n--- node {} log tail:\n{tail}", n.spec.id));
        }
        LabError::Invalid(detail)
    }

    pub fn version(&self) -> KafkaVersion {
        self.state.version
    }

    pub fn brokers(&self) -> Vec<i32> {
        self.state
            .nodes
            .iter()
            .filter(|n| n.spec.role == Role::Broker)
            .map(|n| n.spec.id)
            .collect()
    }

    /// The KRaft controllers, node 0 first (none in a ZooKeeper lab).
    pub fn controllers(&self) -> Vec<i32> {
        self.state
            .nodes
            .iter()
            .filter(|n| n.spec.role == Role::Controller)
            .map(|n| n.spec.id)
            .collect()
    }

    /// The controllers' listener addresses (`host:9093`), as a watchdog's `controllers:`
    /// bootstrap list names them.
    pub fn controller_addresses(&self) -> Vec<String> {
        self.controllers()
            .into_iter()
            .map(|id| format!("{}:{}", topology::host(id), topology::CONTROLLER_PORT))
            .collect()
    }

    /// The controllers, or node 0 for a state that lists none yet (a ZooKeeper lab's
    /// brokers ignore it).
    fn controllers_or_default(&self) -> Vec<i32> {
        let c = self.controllers();
        if c.is_empty() {
            vec![topology::QUORUM_NODE]
        } else {
            c
        }
    }

    /// The nodes that hold the quorum: the controllers, or ZooKeeper.
    fn quorum_nodes(&self) -> Vec<i32> {
        self.state
            .nodes
            .iter()
            .filter(|n| n.spec.role != Role::Broker)
            .map(|n| n.spec.id)
            .collect()
    }

    /// Whether this lab was set up as `opts` asks: the same release, security, number of
    /// quorum nodes (brokers may have been added since) and of log directories per broker,
    /// and for a SASL_SSL lab the same certificate validity (a certificate issued again since by `reissue_cert` is a fault,
    /// not the layout). `up` refuses a lab set up otherwise; callers take it down first.
    pub fn is_set_up_as(&self, opts: &UpOptions) -> bool {
        self.state.version == opts.version
            && self.state.security == opts.security
            && self.quorum_nodes().len() as u32 == opts.version_quorum_size()
            && (self.state.security != Security::SaslSsl || self.state.cert_days == opts.cert_days)
            && self.state.log_dirs == opts.log_dirs
            && self.brokers_keep_logs_on_their_own_filesystems()
    }

    /// False for a lab an older kafka-lab set up with its brokers' logs on the host's disk:
    /// it is set up again rather than reused.
    fn brokers_keep_logs_on_their_own_filesystems(&self) -> bool {
        self.brokers()
            .into_iter()
            .all(|b| logdirs::is_mounted(&self.node_dir(b).join("data")))
    }

    fn quorum_addresses(&self) -> Vec<String> {
        self.state
            .nodes
            .iter()
            .filter(|n| n.spec.role != Role::Broker)
            .map(|n| format!("{}:{}", n.spec.host, n.spec.port))
            .collect()
    }

    /// The quorum as its leader describes it (DescribeQuorum), asked of each broker and
    /// then each controller until one answers: which controller is active, at which epoch.
    pub fn quorum(&self) -> Result<crate::quorum::QuorumState, LabError> {
        if !self.state.version.is_kraft() {
            return Err(LabError::Invalid(
                "a ZooKeeper lab has no KRaft quorum".into(),
            ));
        }
        let mut last = LabError::NotUp;
        let brokers = self.brokers().into_iter().map(broker_address);
        for address in brokers.chain(self.controller_addresses()) {
            match crate::quorum::describe(&address, Duration::from_secs(2)) {
                Ok(q) => return Ok(q),
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// The id of the active controller (the quorum's leader).
    pub fn active_controller(&self) -> Result<i32, LabError> {
        self.quorum().map(|q| q.leader)
    }

    /// Client bootstrap servers of every broker.
    pub fn bootstrap(&self) -> String {
        self.brokers()
            .iter()
            .map(|id| broker_address(*id))
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn status(&self) -> Vec<NodeStatus> {
        let leader = if self.state.version.is_kraft() {
            self.quorum().ok().map(|q| q.leader)
        } else {
            None
        };
        self.state
            .nodes
            .iter()
            .map(|n| {
                let state = match n.pid.map(|p| sys::proc_state(p, &self.marker(n.spec.id))) {
                    Some(ProcState::Running) => "running",
                    Some(ProcState::Stopped) => "frozen",
                    _ => "stopped",
                };
                NodeStatus {
                    id: n.spec.id,
                    role: n.spec.role,
                    address: format!("{}:{}", n.spec.host, n.spec.port),
                    pid: self.running_pid(n.spec.id),
                    state,
                    faults: n.faults.iter().map(Fault::label).collect(),
                    active: n.spec.role == Role::Controller && leader == Some(n.spec.id),
                }
            })
            .collect()
    }

    fn with_lock<T>(
        &mut self,
        f: impl FnOnce(&mut Self) -> Result<T, LabError>,
    ) -> Result<T, LabError> {
        let _lock = LabLock::take(&self.dir)?;
        // Another process may have changed the lab since this handle was opened.
        if let Some(state) = LabState::load(&self.dir)? {
            self.state = state;
        } else {
            return Err(LabError::NotUp);
        }
        let out = f(self)?;
        self.state.save(&self.dir)?;
        Ok(out)
    }

    fn alive_pid(&self, id: i32) -> Result<u32, LabError> {
        self.state.node(id)?;
        self.running_pid(id)
            .ok_or_else(|| LabError::Invalid(format!("node {id} is not running")))
    }

    /// SIGSTOP: the process and its listening socket stay, nothing is answered.
    pub fn freeze(&mut self, id: i32) -> Result<(), LabError> {
        self.with_lock(|lab| sys::signal(lab.alive_pid(id)?, libc::SIGSTOP))
    }

    pub fn thaw(&mut self, id: i32) -> Result<(), LabError> {
        self.with_lock(|lab| sys::signal(lab.alive_pid(id)?, libc::SIGCONT))
    }

    /// SIGKILL: an abrupt crash, no controlled shutdown.
    pub fn kill(&mut self, id: i32) -> Result<(), LabError> {
        self.with_lock(|lab| {
            let Some(pid) = lab.running_pid(id) else {
                lab.state.node(id)?;
                return Ok(());
            };
            sys::signal(pid, libc::SIGKILL)?;
            if !sys::wait_dead(pid, &lab.marker(id), Duration::from_secs(20)) {
                return Err(LabError::Timeout {
                    what: format!("node {id} (pid {pid}) to die"),
                    secs: 20,
                });
            }
            lab.after_exit(id)
        })
    }

    /// SIGTERM: a controlled shutdown (leaderships moved away, then the port closes).
    pub fn stop(&mut self, id: i32) -> Result<(), LabError> {
        self.with_lock(|lab| {
            let Some(pid) = lab.running_pid(id) else {
                lab.state.node(id)?;
                return Ok(());
            };
            sys::signal(pid, libc::SIGCONT)?;
            sys::signal(pid, libc::SIGTERM)?;
            if !sys::wait_dead(pid, &lab.marker(id), STOP_TIMEOUT) {
                return Err(LabError::Timeout {
                    what: format!("node {id} (pid {pid}) to shut down"),
                    secs: STOP_TIMEOUT.as_secs(),
                });
            }
            lab.after_exit(id)
        })
    }

    fn after_exit(&mut self, id: i32) -> Result<(), LabError> {
        netfault::remove(Some(id))?;
        cpu::unlimit(id)?;
        self.end_tracers(id)?;
        let rec = self.state.node_mut(id)?;
        rec.pid = None;
        rec.faults.retain(Fault::persists);
        Ok(())
    }

    /// Restarts a running node under the mutation lock: a controlled shutdown (SIGTERM),
    /// then its process again, waiting until a broker is registered. A node that is not
    /// running is left stopped (its next start picks up what changed).
    fn restart_locked(&mut self, id: i32) -> Result<(), LabError> {
        let Some(pid) = self.running_pid(id) else {
            return Ok(());
        };
        let libs = dist::ensure(self.state.version)?;
        sys::signal(pid, libc::SIGCONT)?;
        sys::signal(pid, libc::SIGTERM)?;
        if !sys::wait_dead(pid, &self.marker(id), STOP_TIMEOUT) {
            return Err(LabError::Timeout {
                what: format!("node {id} (pid {pid}) to shut down"),
                secs: STOP_TIMEOUT.as_secs(),
            });
        }
        self.after_exit(id)?;
        self.spawn(id, &libs)?;
        // Saved now: the wait below may fail, and the new process must stay known.
        self.state.save(&self.dir)?;
        if self.state.node(id)?.spec.role == Role::Broker {
            self.wait_registered(id)?;
        }
        Ok(())
    }

    /// Waits until broker `id` is registered (`READY_TIMEOUT`), or fails at once, with the
    /// last error of its log, when its process exits meanwhile (a broker whose log directory
    /// is still full does: Kafka 4.4 cannot recover its logs there).
    fn wait_registered(&self, id: i32) -> Result<(), LabError> {
        let addr = broker_address(id);
        // Gone for a second, and no process of the node at all: CI once called a start an
        // exit 0.1 s after the spawn, with nothing new in the node's log.
        let mut gone_since: Option<Instant> = None;
        crate::client::wait_until(READY_TIMEOUT, &format!("broker {id} to register"), || {
            // Any process of the node counts (its start goes sh -> setsid -> java).
            if self.running_pid(id).is_some() || !pids_with(&self.marker(id)).is_empty() {
                gone_since = None;
            } else if gone_since.get_or_insert_with(Instant::now).elapsed()
                >= Duration::from_secs(1)
            {
                return Some(Err(self.startup_failed(
                    id,
                    &format!("broker {id} exited while starting: {}", self.exit_cause(id)),
                )));
            }
            crate::client::registered_brokers(&addr)
                .ok()
                .filter(|ids| ids.contains(&id))
                .map(|_| Ok(()))
        })?
    }

    /// Gives broker `id` a new key and certificate signed by the lab CA, valid for `days`
    /// days from now (0: expired at once), in its keystore (same file and password), and
    /// restarts it (controlled shutdown) so that its SASL_SSL listener presents it; waits
    /// until it is registered again. A stopped broker presents it when started. SASL_SSL
    /// labs only. Unless `days` is the lab's validity, the broker carries a
    /// `Fault::Cert` until `heal`, which issues one of the lab's validity again (and
    /// restarts it).
    pub fn reissue_cert(&mut self, id: i32, days: u32) -> Result<(), LabError> {
        self.reissue_cert_by(id, days, false)
    }

    /// As `reissue_cert`, signed by the lab's second CA when `second_ca` (made at its first
    /// use, `secrets/ca2.pem`): a CA rotation, which clients trusting only the lab CA
    /// refuse. `heal` signs with the lab CA again.
    pub fn reissue_cert_by(&mut self, id: i32, days: u32, second_ca: bool) -> Result<(), LabError> {
        self.with_lock(|lab| {
            lab.require_broker(id)?;
            if lab.state.security != Security::SaslSsl {
                return Err(LabError::Invalid(
                    "certificates belong to a SASL_SSL lab (`kafka-lab up --security sasl_ssl`)"
                        .into(),
                ));
            }
            lab.issue_cert(id, days, second_ca)?;
            lab.restart_locked(id)?;
            let lab_days = lab.state.cert_days;
            let rec = lab.state.node_mut(id)?;
            rec.faults.retain(|f| !matches!(f, Fault::Cert { .. }));
            if days != lab_days || second_ca {
                rec.faults.push(Fault::Cert { days, second_ca });
            }
            Ok(())
        })
    }

    /// Changes the watchdog user's SCRAM-SHA-512 password on the brokers, then replaces
    /// `secrets/watchdog.password` with it (a new file renamed over the old one): a Strimzi
    /// KafkaUser's password change, the brokers first, its Secret after. From then on the
    /// old password is refused to new logins; connections already authenticated stay.
    /// PLAIN keeps the password the lab was set up with: each broker's configuration lists
    /// it (`Lab::set_watchdog_password`).
    pub fn set_watchdog_password(&mut self, password: &str) -> Result<(), LabError> {
        self.with_lock(|lab| {
            if lab.state.security != Security::SaslSsl {
                return Err(LabError::Invalid(
                    "the watchdog's password belongs to a SASL_SSL lab (`kafka-lab up --security sasl_ssl`)"
                        .into(),
                ));
            }
            if password.is_empty() || password.chars().any(char::is_control) {
                return Err(LabError::Invalid(
                    "a password of visible characters, not empty".into(),
                ));
            }
            let broker = lab
                .brokers()
                .into_iter()
                .find(|id| lab.running_pid(*id).is_some())
                .ok_or_else(|| LabError::Invalid("no broker is running".into()))?;
            crate::scram::set_password(
                &broker_address(broker),
                crate::secrets::WATCHDOG_USER,
                password,
            )?;
            Secrets::replace_watchdog_password(&lab.dir, password)
        })
    }

    /// Writes broker `id`'s keystore again with a certificate valid for `days`, signed by
    /// the lab CA or its second one.
    fn issue_cert(&self, id: i32, days: u32, second_ca: bool) -> Result<(), LabError> {
        let host = self.state.node(id)?.spec.host.clone();
        let secrets = Secrets::load(&self.dir)?;
        let ca = if second_ca {
            secrets.ensure_second_ca()?
        } else {
            crate::secrets::LAB_CA
        };
        secrets.broker_keystore_signed(id, &host, days, ca)?;
        // Broker users must read their keystores; the lab is throw-away.
        let _ = sys::run("chmod", &["-R", "a+rX", &secrets.dir.display().to_string()]);
        Ok(())
    }

    /// When broker `id`'s certificate stops being valid, as openssl prints it (`Dec  5
    /// 09:18:57 2026 GMT`): the one in its keystore, which it presents once (re)started.
    pub fn cert_end(&self, id: i32) -> Result<String, LabError> {
        self.require_broker(id)?;
        if self.state.security != Security::SaslSsl {
            return Err(LabError::Invalid("this lab has no certificates".into()));
        }
        Secrets::load(&self.dir)?.cert_end(id)
    }

    /// How long the brokers' certificates are valid when issued (`up --cert-days`).
    pub fn cert_days(&self) -> u32 {
        self.state.cert_days
    }

    /// Makes broker `id`'s second log directory (a tmpfs, `up --log-dirs 2`) full and waits
    /// until Kafka takes it offline, the broker staying up on its first directory:
    /// 1. it makes sure a partition of the lab's topic `kafka-lab-fill-<id>` lives in that
    ///    directory (creating the topic, or adding partitions to it, with `id` as the
    ///    preferred leader and up to two other running brokers as followers: Kafka puts a
    ///    new partition in the directory holding the fewest), and writes 8 KiB to it;
    /// 2. a filler file (`logdirs::FILLER`) takes every byte left;
    /// 3. it writes 16 KiB to that partition, which needs a page the directory no longer
    ///    has: the broker's append fails (KAFKA_STORAGE_ERROR to the producer when `id`
    ///    leads it, the replica fetcher's when it follows), and Kafka takes the directory
    ///    offline ("Stopping serving logs in dir"), it moves the leadership of its
    ///    partitions to other replicas, and those `id` only held go offline;
    /// 4. it waits for that line in the broker's log (`FILL_NOTICE_TIMEOUT`).
    ///
    /// The broker carries `Fault::LogDirFull` until `heal`, which removes the filler and
    /// restarts it: Kafka brings a failed directory back only at startup.
    pub fn fill(&mut self, id: i32) -> Result<Filled, LabError> {
        self.with_lock(|lab| {
            lab.require_broker(id)?;
            let dir = lab.small_log_dir(id).ok_or_else(|| {
                LabError::Invalid(format!(
                    "broker {id} has one log directory; set the lab up with `kafka-lab up --log-dirs 2`"
                ))
            })?;
            lab.alive_pid(id)?;
            if lab.state.node(id)?.faults.contains(&Fault::LogDirFull) {
                return Err(LabError::Invalid(format!(
                    "broker {id}'s {} is full already (`kafka-lab heal {id}` first)",
                    dir.display()
                )));
            }
            let (topic, partition) = lab.partition_in_small_dir(id, &dir)?;
            let bootstrap = lab.bootstrap();
            let payload = |kib: usize| vec!["x".repeat(kib << 10)];
            // A partition just added may take a moment to be known to the producer.
            let mut acked = 0;
            crate::client::wait_until(
                Duration::from_secs(30),
                &format!("8 KiB to be written to {topic}-{partition}"),
                || {
                    let r = crate::client::produce(
                        &bootstrap,
                        &topic,
                        partition,
                        "1",
                        &payload(1),
                        Duration::from_secs(5),
                    )
                    .ok()?;
                    acked += r.acknowledged.len();
                    (acked >= 8).then_some(())
                },
            )?;
            let log = lab.node_dir(id).join("server.log");
            let log_from = fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
            // Recorded before the filler exists: a failure from here on leaves it to heal.
            lab.add_fault(id, Fault::LogDirFull)?;
            lab.state.save(&lab.dir)?;
            let filler_bytes = logdirs::fill(&dir)?;
            let filled = Instant::now();
            let report = crate::client::produce(
                &bootstrap,
                &topic,
                partition,
                "1",
                &payload(16),
                Duration::from_secs(5),
            )?;
            let write_error = report.failed.first().map(|(_, code)| format!("{code:?}"));
            let needle = format!("{} {}", logdirs::OFFLINE_LINE, dir.display());
            let deadline = filled + FILL_NOTICE_TIMEOUT;
            let offline_after = loop {
                if log_since(&log, log_from).contains(&needle) {
                    break filled.elapsed();
                }
                if Instant::now() > deadline {
                    return Err(LabError::Timeout {
                        what: format!(
                            "broker {id} to take {} offline (`{needle}` in its log; \
                             the filler stays until `kafka-lab heal {id}`)",
                            dir.display()
                        ),
                        secs: FILL_NOTICE_TIMEOUT.as_secs(),
                    });
                }
                std::thread::sleep(Duration::from_millis(50));
            };
            Ok(Filled {
                partitions: logdirs::partitions_in(&dir)
                    .into_iter()
                    .map(|(t, p)| format!("{t}-{p}"))
                    .collect(),
                dir,
                filler_bytes,
                written: format!("{topic}-{partition}"),
                write_error,
                offline_after,
            })
        })
    }

    /// A partition of `kafka-lab-fill-<id>` that broker `id` keeps in `small`, its second
    /// log directory: an existing one, or new ones until one lands there (as many as the
    /// first directory holds more partitions than `small`, plus one).
    fn partition_in_small_dir(&self, id: i32, small: &Path) -> Result<(String, i32), LabError> {
        let topic = format!("kafka-lab-fill-{id}");
        let bootstrap = self.bootstrap();
        let first = self.node_dir(id).join("data");
        let followers: Vec<i32> = self
            .brokers()
            .into_iter()
            .filter(|b| *b != id && self.running_pid(*b).is_some())
            .take(2)
            .collect();
        for _ in 0..4 {
            let here = logdirs::partitions_in(small);
            if let Some((_, p)) = here.iter().find(|(t, _)| *t == topic) {
                return Ok((topic, *p));
            }
            let surplus = logdirs::partitions_in(&first).len() as i64 - here.len() as i64;
            let count = (surplus + 1).max(1) as usize;
            let replicas: Vec<i32> = std::iter::once(id).chain(followers.clone()).collect();
            let assignment = vec![replicas; count];
            let existing = crate::client::partitions(&bootstrap, &topic)?.len();
            if existing == 0 {
                crate::client::create_topic(&bootstrap, &topic, &assignment, &[])?;
            } else {
                crate::client::add_partitions(&bootstrap, &topic, &assignment)?;
            }
            let total = existing + count;
            // The broker makes a partition's folder once it learns it leads it.
            crate::client::wait_until(
                Duration::from_secs(20),
                &format!("broker {id} to make the folders of {topic}'s {total} partitions"),
                || {
                    let mine = logdirs::partitions_in(&first)
                        .into_iter()
                        .chain(logdirs::partitions_in(small))
                        .filter(|(t, _)| *t == topic)
                        .count();
                    (mine >= total).then_some(())
                },
            )?;
        }
        Err(LabError::Invalid(format!(
            "no partition of {topic} landed in {} (Kafka puts a new partition in the directory with the fewest)",
            small.display()
        )))
    }

    /// Starts a stopped node; a broker id the lab does not have yet is added as a new broker.
    pub fn start(&mut self, id: i32) -> Result<(), LabError> {
        let libs = dist::ensure(self.state.version)?;
        self.with_lock(|lab| {
            if lab.state.node(id).is_err() {
                // A static quorum cannot grow: only brokers are added.
                if id <= topology::QUORUM_NODE || id > 9 {
                    return Err(LabError::Invalid(format!(
                        "cannot add node {id}: broker ids of the lab are 1 to 9 (controllers are fixed when the lab is set up)"
                    )));
                }
                let spec = topology::broker_spec(id);
                lab.prepare_node(&spec)?;
                lab.format(std::slice::from_ref(&spec), &libs)?;
                lab.state.nodes.push(NodeRecord {
                    spec,
                    pid: None,
                    faults: Vec::new(),
                });
            }
            if lab.running_pid(id).is_none() {
                lab.spawn(id, &libs)?;
            }
            Ok(())
        })?;
        if self.state.node(id)?.spec.role == Role::Broker {
            self.wait_registered(id)?;
        }
        Ok(())
    }

    /// Stops a broker's replica fetchers from reaching any leader. It stays up, registered and
    /// heartbeating (the controller listener is untouched): incident 2's dead fetcher thread.
    pub fn cut_replication(&mut self, id: i32) -> Result<(), LabError> {
        self.with_lock(|lab| {
            lab.require_broker(id)?;
            let (uid, _) = sys::ensure_user(&topology::user(id))?;
            netfault::add(
                id,
                "cut-replication",
                &[netfault::DropRule {
                    uid: Some(uid),
                    dest: None,
                    dport: topology::REPLICATION_PORT,
                }],
            )?;
            lab.add_fault(id, Fault::CutReplication)
        })
    }

    /// Cuts a broker off from the quorum (KRaft controllers or ZooKeeper) and, when `full`, from
    /// the other brokers in both directions; clients still reach it (incident 3). A KRaft
    /// controller is cut off from the other controllers and from the brokers, both ways,
    /// and the watchdog (root) still reaches it, as clients still reach an isolated broker.
    pub fn isolate(&mut self, id: i32, full: bool) -> Result<(), LabError> {
        self.with_lock(|lab| {
            let (uid, _) = sys::ensure_user(&topology::user(id))?;
            let role = lab.state.node(id)?.spec.role;
            if role == Role::Controller {
                let rules = lab.controller_cut(id, uid)?;
                let fault = Fault::Isolate { full: true };
                netfault::add(id, &fault.label(), &rules)?;
                return lab.add_fault(id, fault);
            }
            lab.require_broker(id)?;
            let mut rules: Vec<netfault::DropRule> = lab
                .state
                .nodes
                .iter()
                .filter(|n| n.spec.role != Role::Broker)
                .map(|q| netfault::DropRule {
                    uid: Some(uid),
                    dest: Some(q.spec.host.clone()),
                    dport: q.spec.port,
                })
                .collect();
            if full {
                rules.push(netfault::DropRule {
                    uid: Some(uid),
                    dest: None,
                    dport: topology::REPLICATION_PORT,
                });
                rules.push(netfault::DropRule {
                    uid: None,
                    dest: Some(topology::host(id)),
                    dport: topology::REPLICATION_PORT,
                });
            }
            let fault = Fault::Isolate { full };
            netfault::add(id, &fault.label(), &rules)?;
            lab.add_fault(id, fault)
        })
    }

    /// The rules that cut controller `id` (running as `uid`) off from the other controllers
    /// and from the brokers, both ways: its own connections to any controller listener, and
    /// every other lab node's connections to its listener. Other users (the watchdog, the
    /// tests) still reach it.
    fn controller_cut(&self, id: i32, uid: u32) -> Result<Vec<netfault::DropRule>, LabError> {
        let own = self.state.node(id)?.spec.clone();
        let mut rules = vec![netfault::DropRule {
            uid: Some(uid),
            dest: None,
            dport: topology::CONTROLLER_PORT,
        }];
        for n in self.state.nodes.iter().filter(|n| n.spec.id != id) {
            let (other, _) = sys::ensure_user(&topology::user(n.spec.id))?;
            rules.push(netfault::DropRule {
                uid: Some(other),
                dest: Some(own.host.clone()),
                dport: own.port,
            });
        }
        Ok(rules)
    }

    /// Stops some threads of a broker's JVM, the rest running: without `fetchers` its
    /// request handlers and network threads (it accepts connections, answers nothing, and
    /// stays registered and unfenced: its heartbeats go on); with `fetchers` its replica
    /// fetchers (it drops out of the ISRs after replica.lag.time.max.ms and answers
    /// clients). Kafka repairs neither; `heal` resumes the threads.
    pub fn stall(&mut self, id: i32, fetchers: bool) -> Result<(), LabError> {
        self.stall_threads(
            id,
            if fetchers {
                Stall::Fetchers
            } else {
                Stall::DataPlane
            },
        )
    }

    /// Stops the threads `what` names in node `id`'s JVM, the rest running (see `Stall`).
    /// Kafka repairs none of these; `heal` resumes the threads.
    pub fn stall_threads(&mut self, id: i32, what: Stall) -> Result<(), LabError> {
        self.with_lock(|lab| {
            let role = lab.state.node(id)?.spec.role;
            match what {
                Stall::Controller if role != Role::Controller => {
                    return Err(LabError::Invalid(format!(
                        "node {id} is not a KRaft controller (controllers: {:?})",
                        lab.controllers()
                    )))
                }
                Stall::Controller => {}
                _ => lab.require_broker(id)?,
            }
            let pid = lab.alive_pid(id)?;
            let threads = match what {
                Stall::DataPlane => stall::Threads::DataPlane,
                Stall::Fetchers => stall::Threads::Fetchers,
                Stall::Controller => stall::Threads::Controller,
                Stall::Metadata => stall::Threads::Metadata { node: id },
                Stall::GroupCoordinator => stall::Threads::GroupCoordinator,
                Stall::TxnCoordinator => stall::Threads::TxnCoordinator,
            };
            let fault_of = |tracer| match what {
                Stall::DataPlane => Fault::Stall { tracer },
                Stall::Fetchers => Fault::StallFetchers { tracer },
                Stall::Controller => Fault::StallController { tracer },
                Stall::Metadata => Fault::StallMetadata { tracer },
                Stall::GroupCoordinator => Fault::StallGroupCoordinator { tracer },
                Stall::TxnCoordinator => Fault::StallTxnCoordinator { tracer },
            };
            // The same fault again replaces its tracer.
            let same = std::mem::discriminant(&fault_of(0));
            for f in lab
                .state
                .node(id)?
                .faults
                .iter()
                .filter(|f| std::mem::discriminant(*f) == same)
            {
                if let Some(t) = f.tracer() {
                    stall::stop(t)?;
                }
            }
            let (tracer, stopped) = stall::start(pid, threads)?;
            // Fetchers start only once the broker follows a partition; the tracer catches
            // them when they appear. The other threads always exist.
            if stopped == 0 && what != Stall::Fetchers {
                stall::stop(tracer)?;
                let why = match what {
                    Stall::GroupCoordinator => {
                        " (the classic group coordinator of Kafka before 4.0 runs on the \
                         request handlers, it has no threads of its own)"
                    }
                    _ => "",
                };
                return Err(LabError::Invalid(format!(
                    "node {id} (pid {pid}) has no thread named {} to stop{why}",
                    threads.comms().join(" or ")
                )));
            }
            lab.add_fault(id, fault_of(tracer))
        })
    }

    /// Ends the tracers that keep node `id`'s threads stopped.
    fn end_tracers(&self, id: i32) -> Result<(), LabError> {
        for t in self.state.node(id)?.faults.iter().filter_map(Fault::tracer) {
            stall::stop(t)?;
        }
        Ok(())
    }

    /// Starves a node of CPU: it keeps running and answering, slowly.
    pub fn slow(&mut self, id: i32, percent: u32) -> Result<(), LabError> {
        self.with_lock(|lab| {
            let pid = lab.alive_pid(id)?;
            cpu::limit(id, pid, percent)?;
            lab.add_fault(id, Fault::Slow { percent })
        })
    }

    /// Removes every fault of one node (or of all nodes): rules, CPU limits, SIGSTOP,
    /// stalled threads; a broker whose certificate was issued again (`reissue_cert`) gets
    /// one of the lab's validity, a full log directory (`fill`) loses its filler, and the
    /// broker is restarted (controlled), waiting until registered: Kafka brings a failed
    /// log directory back only at startup.
    pub fn heal(&mut self, id: Option<i32>) -> Result<(), LabError> {
        self.with_lock(|lab| {
            let ids: Vec<i32> = match id {
                Some(i) => {
                    lab.state.node(i)?;
                    vec![i]
                }
                None => lab.state.nodes.iter().map(|n| n.spec.id).collect(),
            };
            netfault::remove(id)?;
            for i in ids {
                cpu::unlimit(i)?;
                lab.end_tracers(i)?;
                if let Some(pid) = lab.running_pid(i) {
                    sys::signal(pid, libc::SIGCONT)?;
                }
                let on_disk: Vec<Fault> = lab
                    .state
                    .node(i)?
                    .faults
                    .iter()
                    .copied()
                    .filter(Fault::persists)
                    .collect();
                lab.state.node_mut(i)?.faults.clear();
                if on_disk.is_empty() {
                    continue;
                }
                // Kept until done: a failed heal leaves them to heal again.
                lab.state.node_mut(i)?.faults = on_disk.clone();
                for f in &on_disk {
                    match f {
                        Fault::Cert { .. } => lab.issue_cert(i, lab.state.cert_days, false)?,
                        Fault::LogDirFull => {
                            if let Some(small) = lab.small_log_dir(i) {
                                logdirs::unfill(&small)?;
                            }
                        }
                        _ => {}
                    }
                }
                lab.restart_locked(i)?;
                lab.state.node_mut(i)?.faults.clear();
            }
            Ok(())
        })
    }

    fn require_broker(&self, id: i32) -> Result<(), LabError> {
        let role = self.state.node(id)?.spec.role;
        if role != Role::Broker {
            return Err(LabError::Invalid(format!(
                "node {id} is a {}; this fault applies to brokers",
                role.as_str()
            )));
        }
        Ok(())
    }

    fn add_fault(&mut self, id: i32, fault: Fault) -> Result<(), LabError> {
        let rec = self.state.node_mut(id)?;
        rec.faults
            .retain(|f| std::mem::discriminant(f) != std::mem::discriminant(&fault));
        rec.faults.push(fault);
        Ok(())
    }

    /// The whole server log of a node (its stdout and stderr).
    pub fn server_log(&self, id: i32) -> Result<String, LabError> {
        let path = self.node_dir(id).join("server.log");
        let mut text = String::new();
        fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut text))
            .map_err(|e| LabError::io(&path, e))?;
        Ok(text)
    }

    fn server_log_tail(&self, id: i32, lines: usize) -> String {
        let text = self.server_log(id).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Stops everything and removes every trace: processes, rules, CPU groups, users, files.
    /// Works from whatever is left, even without a state file.
    pub fn down() -> Result<(), LabError> {
        let dir = lab_dir();
        let _lock = if dir.exists() {
            Some(LabLock::take(&dir)?)
        } else {
            None
        };
        // Tracers first, so stalled threads do not hold their JVMs' exit; a tracer also
        // exits by itself once its broker's process is gone.
        if let Ok(Some(state)) = LabState::load(&dir) {
            for t in state
                .nodes
                .iter()
                .flat_map(|n| n.faults.iter().filter_map(Fault::tracer))
            {
                crate::stall::stop(t)?;
            }
        }
        let marker = dir.display().to_string() + "/";
        for pid in pids_with(&marker) {
            // SIGKILL also ends a SIGSTOPped process.
            sys::signal(pid, libc::SIGKILL)?;
        }
        for pid in pids_with(&marker) {
            sys::wait_dead(pid, &marker, Duration::from_secs(20));
        }
        netfault::teardown()?;
        for id in topology::all_node_ids() {
            cpu::remove(id)?;
            sys::remove_user(&topology::user(id))?;
        }
        for mount in logdirs::mounts_under(&dir) {
            logdirs::unmount(&mount)?;
        }
        if dir.exists() {
            fs::remove_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
        }
        let lock = dir.with_extension("mutation.lock");
        let _ = fs::remove_file(lock);
        Ok(())
    }

    /// Whatever of the lab still exists on this machine (for the cleanup check).
    pub fn leftovers() -> Vec<String> {
        let dir = lab_dir();
        let mut found = Vec::new();
        for pid in pids_with(&(dir.display().to_string() + "/")) {
            found.push(format!("process {pid}"));
        }
        if netfault::present() {
            found.push(format!("iptables chain {}", netfault::CHAIN));
        }
        if let Ok(entries) = fs::read_dir("/proc") {
            for pid in entries.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok()) {
                if stall::is_tracer(pid) {
                    found.push(format!("stall tracer process {pid}"));
                }
            }
        }
        for id in topology::all_node_ids() {
            if sys::user_ids(&topology::user(id)).is_some() {
                found.push(format!("user {}", topology::user(id)));
            }
            if cpu::exists(id) {
                found.push(format!("cpu cgroup of node {id}"));
            }
        }
        for mount in logdirs::mounts_under(&dir) {
            found.push(format!("mount {}", mount.display()));
        }
        if dir.exists() {
            found.push(format!("folder {}", dir.display()));
        }
        found
    }
}

/// Which threads `Lab::stall_threads` stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// A broker's request handlers and network threads: it accepts connections and
    /// answers nothing, yet heartbeats (incident 1's zombie).
    DataPlane,
    /// A broker's replica fetchers: it drops out of the ISRs and answers clients.
    Fetchers,
    /// A KRaft controller's event handler (the thread that applies requests and writes
    /// records) while its Raft threads run: as the active controller it keeps its
    /// leadership and the quorum never elects another, yet nothing is applied.
    Controller,
    /// A broker's metadata loader/publisher while its heartbeat and Raft fetch run: it is
    /// never fenced and never learns of a leadership change.
    Metadata,
    /// A broker's group coordinator threads (Kafka 4's event processors and their timer):
    /// it answers Metadata, Produce, Fetch and FindCoordinator, while the requests of the
    /// groups it coordinates wait. Kafka 2.8 and 3.x have no such threads (an error).
    GroupCoordinator,
    /// A broker's transaction coordinator threads: the marker sender and the transaction
    /// log's scheduler (see `stall::Threads::TxnCoordinator`). InitProducerId and EndTxn
    /// still answer, but a committed transaction's markers are never written, so the id's
    /// next transaction (or InitProducerId) gets CONCURRENT_TRANSACTIONS until the heal.
    TxnCoordinator,
}

/// What `path` (a server log) holds from byte `from` on.
fn log_since(path: &Path, from: u64) -> String {
    use std::io::{Seek, SeekFrom};
    let mut text = Vec::new();
    if let Ok(mut f) = fs::File::open(path) {
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let _ = f.read_to_end(&mut text);
        }
    }
    String::from_utf8_lossy(&text).into_owned()
}

/// Client address of broker `id`.
pub fn broker_address(id: i32) -> String {
    format!("{}:{}", topology::host(id), topology::CLIENT_PORT)
}

fn pids_with(marker: &str) -> Vec<u32> {
    let Ok(entries) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| sys::proc_state(*pid, marker) != ProcState::Dead)
        .collect()
}

/// The least privilege kafka-watchdog needs (docs/install.md, "Least privilege"), as
/// AclCommand arguments for `principal`: describe the cluster, describe every topic and its
/// configs, and create, write, read and extend only its canary topics (default name
/// prefix), read its consumer groups, describe its coordinator probe's groups.
pub fn watchdog_acls(principal: &str) -> Vec<Vec<String>> {
    let user = format!("User:{principal}");
    let acl = |resource: &[&str], ops: &[&str]| {
        let mut a = vec![
            "--add".to_string(),
            "--allow-principal".into(),
            user.clone(),
        ];
        a.extend(resource.iter().map(|s| s.to_string()));
        for op in ops {
            a.push("--operation".into());
            a.push(op.to_string());
        }
        a
    };
    vec![
        acl(&["--cluster"], &["Describe"]),
        acl(&["--topic", "*"], &["Describe", "DescribeConfigs"]),
        acl(
            &[
                "--resource-pattern-type",
                "prefixed",
                "--topic",
                CANARY_TOPIC_PREFIX,
            ],
            &["Create", "Write", "Read", "Describe", "Alter"],
        ),
        acl(
            &[
                "--resource-pattern-type",
                "prefixed",
                "--group",
                "kafka-watchdog-canary-",
            ],
            &["Read"],
        ),
        // The group coordinator probe's synthetic groups: OffsetFetch needs Describe.
        acl(
            &[
                "--resource-pattern-type",
                "prefixed",
                "--group",
                "kafka-watchdog-probe-",
            ],
            &["Describe"],
        ),
        // The transaction coordinator probe (`coordinators.transactions`, off by default):
        // its synthetic transactional ids (InitProducerId, EndTxn need Write) and the
        // groups their transactions add (AddOffsetsToTxn needs Read), one prefix.
        acl(
            &[
                "--resource-pattern-type",
                "prefixed",
                "--transactional-id",
                "kafka-watchdog-txn-",
            ],
            &["Write", "Describe"],
        ),
        acl(
            &[
                "--resource-pattern-type",
                "prefixed",
                "--group",
                "kafka-watchdog-txn-",
            ],
            &["Read"],
        ),
    ]
}

/// The watchdog's default canary topic name, granted as a prefix.
pub const CANARY_TOPIC_PREFIX: &str = "__kafka_watchdog_canary";

/// `java` with the lab's small heap, Kafka's jars and `jvm_options`, ready for the tool
/// class's own arguments.
fn java_tool(libs: &Path, jvm_options: &[String], class: &str) -> Command {
    let mut cmd = Command::new(java());
    cmd.args(["-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp"])
        .arg(dist::classpath(libs))
        .args(jvm_options)
        .arg(class)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

fn spawn_tool(mut cmd: Command, name: &str) -> Result<std::process::Child, LabError> {
    cmd.spawn().map_err(|e| LabError::Tool {
        tool: "java".into(),
        detail: format!("cannot run {name}: {e}"),
    })
}

/// Waits for tools started side by side; the first failure is the error, with its output.
fn wait_tools(children: Vec<(String, std::process::Child)>, tool: &str) -> Result<(), LabError> {
    for (label, child) in children {
        let out = child.wait_with_output().map_err(|e| LabError::Tool {
            tool: "java".into(),
            detail: e.to_string(),
        })?;
        if !out.status.success() {
            return Err(LabError::Tool {
                tool: tool.into(),
                detail: format!(
                    "{label}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ),
            });
        }
    }
    Ok(())
}

fn java() -> String {
    match std::env::var_os("JAVA_HOME") {
        Some(home) => Path::new(&home).join("bin/java").display().to_string(),
        None => "java".into(),
    }
}

fn check_java() -> Result<(), LabError> {
    let out = Command::new(java())
        .arg("-version")
        .output()
        .map_err(|e| LabError::Tool {
            tool: "java".into(),
            detail: format!(
                "not found ({e}); install Java 17 (apt-get install openjdk-17-jre-headless)"
            ),
        })?;
    let text = String::from_utf8_lossy(&out.stderr);
    let major = text
        .split('"')
        .nth(1)
        .and_then(|v| v.split('.').next())
        .and_then(|m| m.parse::<u32>().ok())
        .unwrap_or(0);
    if major < 17 {
        return Err(LabError::Tool {
            tool: "java".into(),
            detail: format!(
                "Kafka 3.9 and 4.x need Java 17 or newer, found: {}",
                text.trim()
            ),
        });
    }
    Ok(())
}

fn set_mode(path: &Path, mode: u32) -> Result<(), LabError> {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).map_err(|e| LabError::io(path, e))
}

/// A Kafka cluster id: 16 random bytes, base64url without padding, never starting with `-`
/// (kafka-storage's argument parser would take it for an option: one id in 64).
fn random_cluster_id() -> Result<String, LabError> {
    let path = Path::new("/dev/urandom");
    let mut urandom = fs::File::open(path).map_err(|e| LabError::io(path, e))?;
    loop {
        let mut bytes = [0u8; 16];
        urandom
            .read_exact(&mut bytes)
            .map_err(|e| LabError::io(path, e))?;
        let id = cluster_id_of(bytes);
        if !id.starts_with('-') {
            return Ok(id);
        }
    }
}

fn cluster_id_of(bytes: [u8; 16]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = String::new();
    for b in bytes {
        bits = (bits << 8) | u32::from(b);
        nbits += 8;
        while nbits >= 6 {
            nbits -= 6;
            out.push(ALPHABET[((bits >> nbits) & 63) as usize] as char);
        }
    }
    if nbits > 0 {
        out.push(ALPHABET[((bits << (6 - nbits)) & 63) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_ids_are_kafka_uuids_and_never_look_like_options() {
        // 0xF8.. encodes to '-' first: the id kafka-storage rejected.
        assert!(cluster_id_of([0xF8; 16]).starts_with('-'));
        assert_eq!(cluster_id_of([0; 16]), "AAAAAAAAAAAAAAAAAAAAAA");
        for _ in 0..500 {
            let id = random_cluster_id().unwrap();
            assert_eq!(id.len(), 22, "{id}");
            assert!(!id.starts_with('-'), "{id}");
        }
    }
}
