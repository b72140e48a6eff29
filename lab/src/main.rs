//! The lab's command line: bring a real Kafka cluster up or down and inject faults by node id.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use kafka_lab::{KafkaVersion, Lab, LabError, Security, Stall, UpOptions};

#[derive(Parser)]
#[command(
    name = "kafka-lab",
    version,
    about = "A real Apache Kafka cluster on loopback, with fault injection"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Start the cluster (idempotent) and print its bootstrap servers.
    Up {
        /// Kafka release: 4.4 (4.4.0, KRaft, the default), 4 (4.1.1, KRaft), 3.9 (3.9.1, ZooKeeper),
        /// 3.6 (3.6.2, ZooKeeper), 3.6-kraft (3.6.2, KRaft) or 2.8 (2.8.2, ZooKeeper).
        #[arg(long, default_value = KafkaVersion::DEFAULT.name())]
        kafka: String,
        /// Client listener security: plaintext, sasl_ssl or sasl_oauthbearer.
        #[arg(long, default_value = "plaintext")]
        security: String,
        /// Number of brokers.
        #[arg(long, default_value_t = 3)]
        brokers: u32,
        /// Number of dedicated KRaft controllers (1 to 5): node 0 (127.0.0.10), then 100,
        /// 101, ... (127.0.0.110, ...). KRaft releases only.
        #[arg(long, default_value_t = 1)]
        controllers: u32,
        /// How long the brokers' certificates are valid, in days (sasl_ssl only; default 7).
        #[arg(long)]
        cert_days: Option<u32>,
        /// Log directories per broker: 1, or 2, the second a 64 MiB tmpfs that `fill`
        /// makes full.
        #[arg(long, default_value_t = 1)]
        log_dirs: u32,
    },
    /// Each node: id, role, address, pid, state, faults.
    Status,
    /// Stop everything and remove processes, rules, users and files.
    Down,
    /// SIGSTOP a node: process and port stay, nothing answers.
    Freeze { node: i32 },
    /// SIGCONT a frozen node.
    Thaw { node: i32 },
    /// SIGKILL a node (crash).
    Kill { node: i32 },
    /// Start a stopped node (a new broker id adds a broker).
    Start { node: i32 },
    /// SIGTERM a node and wait for its controlled shutdown.
    Stop { node: i32 },
    /// Cut a broker's replica fetchers off from every leader.
    CutReplication { node: i32 },
    /// Cut a broker off from the quorum and the other brokers; clients still reach it.
    Isolate {
        node: i32,
        /// Cut it off from the quorum (controller or ZooKeeper) only.
        #[arg(long)]
        quorum_only: bool,
    },
    /// Stop a broker's request handler and network threads (ptrace, per thread): it accepts
    /// connections and answers nothing, yet stays registered and unfenced (its heartbeat
    /// thread runs). With --fetchers, stop only its replica fetcher threads; with
    /// --controller, a controller's event handler; with --metadata, a broker's metadata
    /// loader; with --group-coordinator or --txn-coordinator, a broker's coordinator.
    Stall {
        node: i32,
        /// Stop the replica fetcher threads instead: it falls out of the ISRs and still
        /// answers clients (incident 2's dead fetcher).
        #[arg(long, conflicts_with_all = ["controller", "metadata", "group_coordinator", "txn_coordinator"])]
        fetchers: bool,
        /// Stop a KRaft controller's event handler (`quorum-controll`) while its Raft
        /// threads run: as the active controller it keeps the leadership, and nothing is
        /// applied (heartbeats, ISR changes, fencing, elections all wait).
        #[arg(long, conflicts_with_all = ["metadata", "group_coordinator", "txn_coordinator"])]
        controller: bool,
        /// Stop a broker's metadata loader (`kafka-N-metadat`) while its heartbeat and Raft
        /// fetch run: never fenced, it never learns of a leadership change.
        #[arg(long, conflicts_with_all = ["group_coordinator", "txn_coordinator"])]
        metadata: bool,
        /// Stop a broker's group coordinator (Kafka 4's `group-coordinat` threads): it
        /// answers Metadata, Produce and FindCoordinator while its groups' requests wait.
        #[arg(long, conflicts_with = "txn_coordinator")]
        group_coordinator: bool,
        /// Stop a broker's transaction coordinator threads (`TxnMarkerSender`,
        /// `transaction-log`): transactions it coordinates cannot complete.
        #[arg(long)]
        txn_coordinator: bool,
    },
    /// Starve a node of CPU (cgroup quota).
    Slow {
        node: i32,
        #[arg(long, default_value_t = 5)]
        cpu_percent: u32,
    },
    /// Give a broker of a sasl_ssl lab a new certificate (lab CA, same keystore file and
    /// password) valid for --days days, and restart it so that it presents it.
    Cert {
        node: i32,
        /// Validity in days from now; 0 makes a certificate that is expired at once.
        #[arg(long)]
        days: u32,
        /// Sign it with the lab's second CA (secrets/ca2.pem, made at first use) instead:
        /// a CA rotation, refused by clients that trust the lab CA only.
        #[arg(long)]
        second_ca: bool,
    },
    /// Change the watchdog user's SCRAM-SHA-512 password on the brokers of a sasl_ssl lab
    /// (AlterUserScramCredentials), then replace secrets/watchdog.password with it, as a
    /// Strimzi KafkaUser password change does. The old password is refused from then on.
    Password {
        /// The new password; a random one when left out.
        new: Option<String>,
    },
    /// Make a broker's second log directory (`up --log-dirs 2`) full: a partition of the
    /// lab's topic kafka-lab-fill-N is put there if none is, a filler takes every byte left,
    /// a write to that partition fails, and Kafka takes the directory offline (the broker
    /// stays up); waits for "Stopping serving logs in dir" in its log.
    Fill { node: i32 },
    /// Remove the faults of one node, or of all nodes (stalled threads resume; a broker
    /// with a certificate from `cert` gets one of the lab's validity, a full log directory
    /// loses its filler, and the broker restarts).
    Heal { node: Option<i32> },
    /// Print a node's server log.
    Log { node: i32 },
    /// Serve the OAUTHBEARER lab's token endpoint (started by `up`; not for direct use).
    #[command(hide = true)]
    TokenEndpoint {
        #[arg(long)]
        dir: std::path::PathBuf,
    },
    /// Receive webhooks: print each notification, answer 200 (for trying out alerting).
    Sink {
        #[arg(long, default_value = kafka_lab::sink::DEFAULT_LISTEN)]
        listen: std::net::SocketAddr,
        /// Also append each body as one JSON line to this file.
        #[arg(long)]
        jsonl: Option<std::path::PathBuf>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("kafka-lab: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cmd: Cmd) -> Result<(), LabError> {
    match cmd {
        Cmd::Up {
            kafka,
            security,
            brokers,
            controllers,
            cert_days,
            log_dirs,
        } => {
            let version = KafkaVersion::parse(&kafka).ok_or_else(|| {
                let known: Vec<&str> = KafkaVersion::ALL.iter().map(|v| v.name()).collect();
                LabError::Invalid(format!(
                    "--kafka {kafka}: expected one of {}",
                    known.join(", ")
                ))
            })?;
            let security = match security.as_str() {
                "plaintext" => Security::Plaintext,
                "sasl_ssl" => Security::SaslSsl,
                "sasl_oauthbearer" => Security::SaslOauthbearer,
                other => {
                    return Err(LabError::Invalid(format!(
                        "--security {other}: expected plaintext, sasl_ssl or sasl_oauthbearer"
                    )))
                }
            };
            if !(1..=9).contains(&brokers) {
                return Err(LabError::Invalid(format!(
                    "--brokers {brokers}: expected 1 to 9"
                )));
            }
            if !(1..=kafka_lab::topology::MAX_CONTROLLERS).contains(&controllers) {
                return Err(LabError::Invalid(format!(
                    "--controllers {controllers}: expected 1 to {}",
                    kafka_lab::topology::MAX_CONTROLLERS
                )));
            }
            if controllers > 1 && !version.is_kraft() {
                return Err(LabError::Invalid(format!(
                    "--controllers {controllers}: Kafka {} runs in ZooKeeper mode, without KRaft controllers",
                    version.label()
                )));
            }
            if cert_days.is_some() && security != Security::SaslSsl {
                return Err(LabError::Invalid(
                    "--cert-days: only a sasl_ssl lab has certificates".into(),
                ));
            }
            let lab = Lab::up(&UpOptions {
                version,
                security,
                brokers,
                controllers,
                cert_days: cert_days.unwrap_or(kafka_lab::secrets::DEFAULT_CERT_DAYS),
                log_dirs,
            })?;
            match lab.secure_bootstrap() {
                Some(secure) => {
                    println!("{secure}");
                    eprintln!(
                        "kafka-lab: SASL_SSL (SCRAM-SHA-512 or PLAIN, user {}) on the line above; password and CA in {}; PLAINTEXT at {}",
                        kafka_lab::secrets::WATCHDOG_USER,
                        kafka_lab::secrets::Secrets::dir(&kafka_lab::lab_dir()).display(),
                        lab.bootstrap()
                    );
                }
                None => match kafka_lab::oauth::bootstrap(&lab) {
                    Some(oauth) => {
                        println!("{oauth}");
                        eprintln!(
                            "kafka-lab: SASL_PLAINTEXT with OAUTHBEARER on the line above; token endpoint {} (client {}, secret in {}); PLAINTEXT at {}",
                            kafka_lab::oauth::token_url(),
                            kafka_lab::oauth::CLIENT_ID,
                            kafka_lab::oauth::secret_path(&kafka_lab::lab_dir()).display(),
                            lab.bootstrap()
                        );
                    }
                    None => println!("{}", lab.bootstrap()),
                },
            }
        }
        Cmd::Status => {
            let lab = Lab::open()?;
            println!(
                "Kafka {}  bootstrap {}",
                lab.version().label(),
                lab.bootstrap()
            );
            if lab.version().is_kraft() {
                match lab.quorum() {
                    Ok(q) => println!(
                        "quorum: leader {} at epoch {}, high watermark {}",
                        q.leader, q.epoch, q.high_watermark
                    ),
                    Err(e) => println!("quorum: unknown ({e})"),
                }
            }
            if lab.log_dirs() > 1 {
                println!(
                    "log dirs: data and data2 per broker (data2 a {} MiB tmpfs)",
                    kafka_lab::logdirs::SMALL_DIR_MIB
                );
            }
            println!(
                "{:<4} {:<19} {:<18} {:<8} {:<9} FAULTS",
                "ID", "ROLE", "ADDRESS", "PID", "STATE"
            );
            for n in lab.status() {
                let role = if n.active {
                    "controller (active)"
                } else {
                    n.role.as_str()
                };
                println!(
                    "{:<4} {:<19} {:<18} {:<8} {:<9} {}",
                    n.id,
                    role,
                    n.address,
                    n.pid.map(|p| p.to_string()).unwrap_or_else(|| "-".into()),
                    n.state,
                    if n.faults.is_empty() {
                        "-".into()
                    } else {
                        n.faults.join(",")
                    }
                );
            }
        }
        Cmd::Down => Lab::down()?,
        Cmd::Freeze { node } => Lab::open()?.freeze(node)?,
        Cmd::Thaw { node } => Lab::open()?.thaw(node)?,
        Cmd::Kill { node } => Lab::open()?.kill(node)?,
        Cmd::Start { node } => Lab::open()?.start(node)?,
        Cmd::Stop { node } => Lab::open()?.stop(node)?,
        Cmd::CutReplication { node } => Lab::open()?.cut_replication(node)?,
        Cmd::Isolate { node, quorum_only } => Lab::open()?.isolate(node, !quorum_only)?,
        Cmd::Stall {
            node,
            fetchers,
            controller,
            metadata,
            group_coordinator,
            txn_coordinator,
        } => {
            let what = if fetchers {
                Stall::Fetchers
            } else if controller {
                Stall::Controller
            } else if metadata {
                Stall::Metadata
            } else if group_coordinator {
                Stall::GroupCoordinator
            } else if txn_coordinator {
                Stall::TxnCoordinator
            } else {
                Stall::DataPlane
            };
            Lab::open()?.stall_threads(node, what)?
        }
        Cmd::Slow { node, cpu_percent } => Lab::open()?.slow(node, cpu_percent)?,
        Cmd::Cert {
            node,
            days,
            second_ca,
        } => {
            let mut lab = Lab::open()?;
            lab.reissue_cert_by(node, days, second_ca)?;
            println!(
                "broker {node}: certificate valid until {} (restarted)",
                lab.cert_end(node)?
            );
        }
        Cmd::Password { new } => {
            let mut lab = Lab::open()?;
            let password = match new {
                Some(p) => p,
                None => kafka_lab::secrets::random_password()?,
            };
            lab.set_watchdog_password(&password)?;
            let file =
                kafka_lab::secrets::Secrets::dir(&kafka_lab::lab_dir()).join("watchdog.password");
            println!(
                "user {}: SCRAM-SHA-512 password changed on the brokers and written to {}",
                kafka_lab::secrets::WATCHDOG_USER,
                file.display()
            );
        }
        Cmd::Fill { node } => {
            let f = Lab::open()?.fill(node)?;
            println!(
                "broker {node}: {} full ({} bytes of filler); the write to {} got {}; offline in the broker's log {:.2} s after the fill",
                f.dir.display(),
                f.filler_bytes,
                f.written,
                f.write_error.as_deref().unwrap_or("an acknowledgement"),
                f.offline_after.as_secs_f64()
            );
            println!("partitions in it: {}", f.partitions.join(" "));
        }
        Cmd::Heal { node } => Lab::open()?.heal(node)?,
        Cmd::Log { node } => print!("{}", Lab::open()?.server_log(node)?),
        Cmd::Sink { listen, jsonl } => sink(listen, jsonl)?,
        Cmd::TokenEndpoint { dir } => kafka_lab::oauth::serve(&dir)?,
    }
    Ok(())
}

/// Serves until the process is stopped (Ctrl-C).
fn sink(listen: std::net::SocketAddr, jsonl: Option<std::path::PathBuf>) -> Result<(), LabError> {
    let runtime = tokio::runtime::Runtime::new()
        .map_err(|e| LabError::Invalid(format!("cannot start the async runtime: {e}")))?;
    runtime.block_on(async {
        let options = kafka_lab::sink::SinkOptions { print: true, jsonl };
        let sink = kafka_lab::sink::Sink::start_with(listen, options).await?;
        eprintln!(
            "kafka-lab sink: receiving webhooks at {} (Ctrl-C stops)",
            sink.url()
        );
        std::future::pending::<()>().await;
        Ok(())
    })
}
