//! How peers prove who they are (issue 38 item 5): with a key every instance shares
//! (`peers.key_file`), never with the `http.auth` credential that writes silences.
//!
//! - The ask: `GET /api/v1/peer` carries `Kafka-Watchdog-Peer: v1 <unix ms> <nonce> <mac>`,
//!   the MAC (HMAC-SHA256) over the time and a fresh random nonce. The answering peer
//!   refuses an ask without a good MAC, or whose time is more than `MAX_ASK_SKEW` from its
//!   clock (an old ask replayed).
//! - The answer: its body and `Kafka-Watchdog-Peer: v1 <mac>`, the MAC over the ask's nonce
//!   and the body. The asker takes it only when the MAC is good: an answer forged, altered
//!   on the way, or replayed from an earlier ask (another nonce) is refused and counted.
//!
//! Separate labels in each MAC's input keep an ask from passing for an answer. The key
//! only proves membership: TLS (https peers) still keeps the documents private on the way.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ring::hmac;

use crate::config::live::{self, Current};
use crate::config::{Secret, PEERS_KEY_MIN_CHARS};

use crate::model::time::unix_ms;

/// The header of both the ask and the answer.
pub const HEADER: &str = "kafka-watchdog-peer";
const VERSION: &str = "v1";
/// How far an ask's time may be from the answering peer's clock.
pub const MAX_ASK_SKEW: Duration = Duration::from_secs(300);
const NONCE_BYTES: usize = 16;

/// Why an answer was refused: the label values of
/// `kafka_watchdog_peer_answers_refused_total{reason}`, a closed set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, thiserror::Error)]
pub enum Refusal {
    /// No signature at all: not a watchdog of this version, or not a watchdog.
    #[error("the answer is not signed: not a watchdog holding the peer key (an older version, or something else at that address)")]
    Unsigned,
    /// Signed, but not with this key, or not for this ask (altered, replayed).
    #[error("the answer's signature is wrong: another peer key, or an answer altered or replayed on the way")]
    BadSignature,
    /// Signed well, but not a peer document this version reads.
    #[error("the answer is not a peer document")]
    Malformed,
}

impl Refusal {
    pub const ALL: [Refusal; 3] = [Refusal::Unsigned, Refusal::BadSignature, Refusal::Malformed];

    pub fn as_str(self) -> &'static str {
        match self {
            Refusal::Unsigned => "unsigned",
            Refusal::BadSignature => "bad_signature",
            Refusal::Malformed => "malformed",
        }
    }
}

/// Why an ask was refused (said to the asker in a 401's body).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskRefused {
    #[error(
        "a peer ask must carry the {HEADER} header, signed with the peer key (peers.key_file)"
    )]
    Unsigned,
    #[error("the {HEADER} header is not 'v1 <unix ms> <nonce> <mac>'")]
    Shape,
    #[error("the ask's signature is wrong: the peers hold different keys (peers.key_file must be the same on every instance)")]
    BadSignature,
    #[error(
        "the ask's time is {0} s off this watchdog's clock (at most 300): set both clocks by NTP"
    )]
    Skew(u64),
}

/// A random value the asker sends and the answer's MAC covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nonce(String);

impl Nonce {
    /// A fresh one from the system's random source.
    pub fn fresh() -> Option<Nonce> {
        let mut b = [0u8; NONCE_BYTES];
        ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut b).ok()?;
        Some(Nonce(hex(&b)))
    }
}

/// The shared key, ready to sign and check.
pub struct PeerKey(hmac::Key);

impl std::fmt::Debug for PeerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerKey(***)")
    }
}

impl PeerKey {
    pub fn new(secret: &str) -> PeerKey {
        PeerKey(hmac::Key::new(hmac::HMAC_SHA256, secret.as_bytes()))
    }

    fn ask_input(at_ms: u64, nonce: &str) -> String {
        format!("kafka-watchdog peer ask {VERSION}\n{at_ms}\n{nonce}")
    }

    fn answer_input(nonce: &Nonce, body: &[u8]) -> Vec<u8> {
        let mut input = format!("kafka-watchdog peer answer {VERSION}\n{}\n", nonce.0).into_bytes();
        input.extend_from_slice(body);
        input
    }

    /// The ask's header value, at `now` with `nonce`.
    pub fn ask(&self, nonce: &Nonce, now: SystemTime) -> String {
        let at = unix_ms(now);
        let tag = hmac::sign(&self.0, Self::ask_input(at, &nonce.0).as_bytes());
        format!("{VERSION} {at} {} {}", nonce.0, hex(tag.as_ref()))
    }

    /// Checks an ask's header at `now`: the nonce to sign the answer with, or why not.
    pub fn check_ask(&self, header: Option<&str>, now: SystemTime) -> Result<Nonce, AskRefused> {
        let header = header.ok_or(AskRefused::Unsigned)?;
        let parts: Vec<&str> = header.split_ascii_whitespace().collect();
        let [VERSION, at, nonce, mac] = parts.as_slice() else {
            return Err(AskRefused::Shape);
        };
        let at_ms: u64 = at.parse().map_err(|_| AskRefused::Shape)?;
        if nonce.len() != NONCE_BYTES * 2 || !nonce.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(AskRefused::Shape);
        }
        let mac = unhex(mac).ok_or(AskRefused::Shape)?;
        hmac::verify(&self.0, Self::ask_input(at_ms, nonce).as_bytes(), &mac)
            .map_err(|_| AskRefused::BadSignature)?;
        let off = unix_ms(now).abs_diff(at_ms) / 1000;
        if off > MAX_ASK_SKEW.as_secs() {
            return Err(AskRefused::Skew(off));
        }
        Ok(Nonce(nonce.to_string()))
    }

    /// The answer's header value for `body`, sent to the ask that carried `nonce`.
    pub fn sign_answer(&self, nonce: &Nonce, body: &[u8]) -> String {
        let tag = hmac::sign(&self.0, &Self::answer_input(nonce, body));
        format!("{VERSION} {}", hex(tag.as_ref()))
    }

    /// Checks an answer to the ask that carried `nonce`.
    pub fn check_answer(
        &self,
        nonce: &Nonce,
        body: &[u8],
        header: Option<&str>,
    ) -> Result<(), Refusal> {
        let header = header.ok_or(Refusal::Unsigned)?;
        let mac = header
            .strip_prefix(VERSION)
            .map(str::trim)
            .and_then(unhex)
            .ok_or(Refusal::BadSignature)?;
        hmac::verify(&self.0, &Self::answer_input(nonce, body), &mac)
            .map_err(|_| Refusal::BadSignature)
    }
}

/// The peer key as `peers.key_file` holds it now (`config::live`): the next ask, and the
/// next answer, are signed and checked with a rotated key without a reload. A rewrite
/// shorter than the key must be keeps the last key (said once); one that cannot be read
/// at all is kept out by `config::live` itself.
pub struct LiveKey {
    secret: Current,
    made: Mutex<(u64, Arc<PeerKey>)>,
}

impl std::fmt::Debug for LiveKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LiveKey({:?})", self.secret)
    }
}

impl LiveKey {
    /// `secret` watched when it came from a file, fixed otherwise.
    pub fn of(secret: &Secret) -> LiveKey {
        let current = live::secret(secret)
            .inspect_err(|why| tracing::warn!(problem = %why, "cannot watch peers.key_file: the key loaded stays in use"))
            .unwrap_or_else(|_| Current::from(secret.expose()));
        LiveKey::new(current)
    }

    pub fn new(secret: Current) -> LiveKey {
        let made = (secret.generation(), Arc::new(PeerKey::new(&secret.text())));
        LiveKey {
            secret,
            made: Mutex::new(made),
        }
    }

    /// The key to sign and check with now; made again only when the file changed.
    pub fn now(&self) -> Arc<PeerKey> {
        let generation = self.secret.generation();
        let mut made = self.made.lock().unwrap_or_else(|p| p.into_inner());
        if made.0 != generation {
            made.0 = generation;
            let text = self.secret.text();
            if text.trim().chars().count() < PEERS_KEY_MIN_CHARS {
                tracing::warn!(
                    "peers.key_file changed to a key shorter than {PEERS_KEY_MIN_CHARS} characters: the last key stays in use"
                );
            } else {
                made.1 = Arc::new(PeerKey::new(&text));
            }
        }
        made.1.clone()
    }
}

impl From<&str> for LiveKey {
    fn from(key: &str) -> LiveKey {
        LiveKey::new(Current::from(key))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 || s.len() > 128 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(ms: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::from_millis(1_800_000_000_000 + ms)
    }

    /// Issue 39 item 2: a rotated `peers.key_file` signs the next ask; a rewrite too short
    /// to be a peer key keeps the last one.
    #[test]
    fn a_live_key_follows_its_file_but_never_to_a_short_key() {
        let dir = std::env::temp_dir().join(format!("kw-peer-key-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("key");
        let (old, new) = ("o".repeat(40), "n".repeat(40));
        std::fs::write(&file, &old).unwrap();
        let key = LiveKey::of(&Secret::from_file(old.clone(), file.clone()));
        let signed_by = |key: &PeerKey, by: &str| {
            let nonce = Nonce::fresh().unwrap();
            PeerKey::new(by)
                .check_ask(Some(&key.ask(&nonce, t(0))), t(0))
                .is_ok()
        };
        assert!(signed_by(&key.now(), &old));
        std::fs::write(&file, &new).unwrap();
        live::look_all();
        assert!(signed_by(&key.now(), &new), "the next ask uses the new key");
        std::fs::write(&file, "short").unwrap();
        live::look_all();
        assert!(signed_by(&key.now(), &new), "a short key is not taken");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn an_ask_passes_with_the_key_and_fails_without_it_or_late() {
        let key = PeerKey::new(&"k".repeat(40));
        let nonce = Nonce::fresh().unwrap();
        let header = key.ask(&nonce, t(0));
        assert_eq!(key.check_ask(Some(&header), t(1_000)), Ok(nonce.clone()));
        assert_eq!(key.check_ask(None, t(0)), Err(AskRefused::Unsigned));
        let other = PeerKey::new(&"o".repeat(40));
        assert_eq!(
            other.check_ask(Some(&header), t(0)),
            Err(AskRefused::BadSignature)
        );
        assert_eq!(
            key.check_ask(Some(&header), t(301_000)),
            Err(AskRefused::Skew(301))
        );
        // Another time with the same MAC: not the ask that was signed.
        let parts: Vec<&str> = header.split(' ').collect();
        let moved = format!("v1 {} {} {}", 5, parts[2], parts[3]);
        assert_eq!(
            key.check_ask(Some(&moved), t(0)),
            Err(AskRefused::BadSignature)
        );
        for junk in ["", "v1", "v2 1 2 3", "v1 x 00 00", "v1 1 zz 00"] {
            assert_eq!(
                key.check_ask(Some(junk), t(0)),
                Err(AskRefused::Shape),
                "{junk}"
            );
        }
    }

    #[test]
    fn an_answer_is_taken_only_for_its_ask_with_its_body() {
        let key = PeerKey::new(&"k".repeat(40));
        let nonce = Nonce::fresh().unwrap();
        let body = br#"{"instance_id":"wd-0"}"#;
        let header = key.sign_answer(&nonce, body);
        assert_eq!(key.check_answer(&nonce, body, Some(&header)), Ok(()));
        assert_eq!(key.check_answer(&nonce, body, None), Err(Refusal::Unsigned));
        // Replayed to another ask, altered, or signed with another key.
        let later = Nonce::fresh().unwrap();
        assert_eq!(
            key.check_answer(&later, body, Some(&header)),
            Err(Refusal::BadSignature)
        );
        assert_eq!(
            key.check_answer(&nonce, br#"{"instance_id":"wd-1"}"#, Some(&header)),
            Err(Refusal::BadSignature)
        );
        let other = PeerKey::new(&"o".repeat(40)).sign_answer(&nonce, body);
        assert_eq!(
            key.check_answer(&nonce, body, Some(&other)),
            Err(Refusal::BadSignature)
        );
        // An ask's MAC is no answer's.
        let ask = key.ask(&nonce, t(0));
        assert_eq!(
            key.check_answer(&nonce, body, Some(&ask)),
            Err(Refusal::BadSignature)
        );
    }
}
