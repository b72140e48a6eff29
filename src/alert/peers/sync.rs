//! Asking the peers: every `poll_interval`, each peer's `/api/v1/peer` (the URLs of
//! `peers.urls`, and every address `peers.dns` resolves to at that look), signed with the
//! peer key (`auth`; the `http.auth` credential is never sent). An answer whose signature
//! is good updates the peer's view and hands its silences to `merge`; any other is refused
//! and counted by reason. A peer that stops answering is said once, and again when it is
//! back.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::sync::watch;

use super::auth::{LiveKey, Nonce, PeerKey, Refusal, HEADER};
use super::{parse_answer, Answer, Peers, PEER_PATH};
use crate::config::live::{self, Current};
use crate::config::PeersConfig;
use crate::model::silence::{Invalid, Silence};

/// Largest peer document read: its deliveries and silences are bounded far below.
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// The client peers are asked with, made again (once) when `peers.ca_file` took new
/// content (`config::live`): a CA rotated in a mounted Secret is trusted from the next ask.
pub type Client = Arc<live::Remade<reqwest::Client>>;

#[derive(Debug, thiserror::Error)]
pub enum PeerClientError {
    #[error("peers.ca_file {path}: {detail}")]
    Ca { path: String, detail: String },
    #[error("peers: cannot build the HTTP client: {0}")]
    Client(String),
}

/// What the task needs besides the shared state.
#[derive(Clone)]
pub struct Setup {
    pub config: PeersConfig,
    /// Requests leave from the address this instance listens on when it is one address
    /// (not 0.0.0.0): a firewall that admits peers by address sees the instance's own.
    pub listen: SocketAddr,
}

pub fn client(setup: &Setup) -> Result<Client, PeerClientError> {
    let ca = match &setup.config.ca_file {
        Some(path) => live::watch(live::Kind::Certificates, &[path]).map_err(|detail| {
            PeerClientError::Ca {
                path: path.display().to_string(),
                detail,
            }
        })?,
        None => Current::fixed(Vec::new()),
    };
    let built = setup.clone();
    live::Remade::new(ca, "the peers' client", move |ca| {
        build_client(&built, ca.first().map(Vec::as_slice))
    })
    .map(Arc::new)
    .map_err(PeerClientError::Client)
}

/// The client of `setup`, trusting the certificates of `ca` (PEM) besides the system's.
fn build_client(setup: &Setup, ca: Option<&[u8]>) -> Result<reqwest::Client, String> {
    let mut b = crate::observe::wire::trust_system_roots(reqwest::Client::builder());
    if let Some(pem) = ca {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| format!("peers.ca_file: {e}"))?;
        for c in certs {
            b = b.add_root_certificate(c);
        }
    }
    if !setup.listen.ip().is_unspecified() {
        b = b.local_address(Some(setup.listen.ip()));
    }
    // A peer that does not answer within the takeover time is gone anyway.
    let timeout = setup.config.takeover.min(Duration::from_secs(5));
    b.timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("kafka-watchdog/", env!("CARGO_PKG_VERSION")))
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| e.to_string())
}

/// The peers' base URLs at this look.
async fn targets(config: &PeersConfig) -> Vec<String> {
    let mut out: Vec<String> = config
        .urls
        .iter()
        .map(|u| u.as_str().trim_end_matches('/').to_string())
        .collect();
    if let Some(d) = &config.dns {
        match tokio::net::lookup_host((d.host.as_str(), d.port)).await {
            Ok(addrs) => {
                for a in addrs {
                    let host = match a.ip() {
                        IpAddr::V4(ip) => ip.to_string(),
                        IpAddr::V6(ip) => format!("[{ip}]"),
                    };
                    out.push(format!("{}://{host}:{}", d.scheme, a.port()));
                }
            }
            Err(e) => {
                tracing::debug!(name = %d.host, error = %e, "peers.dns does not resolve now");
            }
        }
    }
    out.sort();
    out.dedup();
    // A name resolving to hundreds of addresses is not a fleet of watchdogs; asking them
    // all would grow the views and the unreachable list without bound.
    if out.len() > super::MAX_PEERS {
        tracing::debug!(
            count = out.len(),
            "peers: more addresses than {} peers; the first asked",
            super::MAX_PEERS
        );
        out.truncate(super::MAX_PEERS);
    }
    out
}

/// Why a look at one peer brought no answer to take.
#[derive(Debug)]
pub enum AskError {
    /// It answered, and the answer was refused (counted by reason).
    Refused(Refusal),
    /// No answer: refused, timed out, an HTTP error.
    Failed(String),
}

impl std::fmt::Display for AskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AskError::Refused(r) => write!(f, "answer refused: {r}"),
            AskError::Failed(why) => f.write_str(why),
        }
    }
}

/// One look at the peer at `base`: its answer, taken only when signed with `key` for this
/// very ask.
pub async fn ask(client: &reqwest::Client, base: &str, key: &PeerKey) -> Result<Answer, AskError> {
    let failed = |why: String| AskError::Failed(why);
    let nonce = Nonce::fresh().ok_or_else(|| failed("the system's random source failed".into()))?;
    let mut resp = client
        .get(format!("{base}{PEER_PATH}"))
        .header(HEADER, key.ask(&nonce, SystemTime::now()))
        .send()
        .await
        .map_err(|e| failed(e.to_string()))?;
    let status = resp.status();
    if !status.is_success() {
        let hint = if status == reqwest::StatusCode::UNAUTHORIZED {
            ": it refused this watchdog's ask (another peer key, an older version, or clocks more than 300 s apart)"
        } else {
            ""
        };
        return Err(failed(format!("HTTP {status}{hint}")));
    }
    let signature = resp
        .headers()
        .get(HEADER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    // Read chunk by chunk, so an answer past the bound is refused before it is all held.
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|e| failed(e.to_string()))? {
        body.extend_from_slice(&chunk);
        if body.len() > MAX_ANSWER_BYTES {
            return Err(AskError::Refused(Refusal::Malformed));
        }
    }
    key.check_answer(&nonce, &body, signature.as_deref())
        .map_err(AskError::Refused)?;
    parse_answer(&body).map_err(|_| AskError::Refused(Refusal::Malformed))
}

/// Asks every peer, every poll interval, until `stop`.
pub async fn run(
    peers: Arc<Peers>,
    setup: Setup,
    client: Client,
    merge: impl Fn(&str, Vec<Silence>) -> Vec<(String, Invalid)> + Send + Sync + 'static,
    mut stop: watch::Receiver<bool>,
) {
    // This watchdog's own URLs (found by its instance_id in the answer, then skipped), and
    // per URL why its last look failed (said once, when it starts failing).
    let mut own: Vec<String> = Vec::new();
    let mut failing: BTreeMap<String, String> = BTreeMap::new();
    let key = LiveKey::of(&setup.config.key);
    let mut tick = tokio::time::interval(peers.poll_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => return,
        }
        let all = targets(&setup.config).await;
        let round_client = client.get();
        let asks = all
            .iter()
            .filter(|u| !own.contains(u))
            .map(|u| async { (u.clone(), ask(&round_client, u, &key.now()).await) });
        for (url, answer) in futures::future::join_all(asks).await {
            match answer {
                Ok(a) if a.instance_id == peers.instance_id => {
                    tracing::debug!(url = %url, "peers: this URL is this watchdog itself");
                    own.push(url);
                }
                Ok(a) => {
                    if failing.remove(&url).is_some() {
                        tracing::info!(peer = %a.instance_id, url = %url, "peer answers again");
                    }
                    peers.heard(&url, &a, SystemTime::now());
                    let refused = merge(&a.instance_id, a.silences);
                    peers.silences_refused(&a.instance_id, refused);
                }
                Err(why) => {
                    if let AskError::Refused(r) = &why {
                        peers.answer_refused(*r);
                    }
                    if !failing.contains_key(&url) {
                        tracing::warn!(url = %url, why = %why, "peer does not answer, or its answer is refused: its silences and deliveries are not taken; after peers.takeover_secs this watchdog sends in its place");
                    }
                    failing.insert(url, why.to_string());
                }
            }
        }
        // A peer URL gone from DNS is no longer one that fails.
        failing.retain(|u, _| all.contains(u));
        peers.set_unreachable(failing.keys().cloned().collect());
    }
}
