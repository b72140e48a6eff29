//! Credentials read from files and kept current: secrets (`*_file` keys), CA bundles,
//! certificates and their keys. Kubernetes updates a mounted Secret in place (a new
//! `..data` folder, its link swapped atomically), cert-manager renews certificates, and a
//! Strimzi KafkaUser's password changes, all without a signal to anyone: a credential read
//! once at start would leave the watchdog failing to authenticate until a restart.
//!
//! Each file set in use is registered here once ([`watch`]) and read again every
//! [`EVERY`] by one plain thread ([`start_watcher`]), off the async runtime: a hung file
//! system stalls that thread and nothing else. Content is compared by digest, not by time
//! (a Secret's swap keeps the link's), and the path is opened again each time, so a swapped
//! `..data` link is followed. Content that reads and checks well (a secret is non-empty
//! UTF-8; a CA file holds certificates; a certificate and key parse and go together) is
//! published to every user, who reads it at its next connection ([`Current`]); content
//! that does not is logged and counted once, and the last good content stays in use.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use tokio_rustls::rustls::crypto::ring as ring_provider;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::rustls::Error;

use super::schema as s;

/// How often every watched file is read again: as often as the configuration file, well
/// within the minute or so Kubernetes takes to update a mounted Secret.
pub const EVERY: Duration = Duration::from_secs(5);

/// Far above any certificate chain; a wrong path (a log, a device) fails fast.
pub(crate) const PEM_MAX_BYTES: u64 = 1024 * 1024;

/// What a watched file set holds, and so how its content is checked before use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// One file: a password, a client secret, a token (UTF-8, not empty).
    Secret,
    /// One file: trusted CA certificates (PEM).
    Certificates,
    /// Two files: a certificate chain and its private key (PEM), which must go together.
    CertificateAndKey,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Secret, Kind::Certificates, Kind::CertificateAndKey];

    /// The `kind` label of `credential_reloads_total`.
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Secret => "secret",
            Kind::Certificates => "certificates",
            Kind::CertificateAndKey => "certificate_and_key",
        }
    }

    fn max_bytes(self) -> u64 {
        match self {
            Kind::Secret => s::SECRET_FILE_MAX_BYTES,
            Kind::Certificates | Kind::CertificateAndKey => PEM_MAX_BYTES,
        }
    }

    /// The content as users take it, or why it cannot be used.
    fn check(self, mut raw: Vec<Vec<u8>>) -> Result<Vec<Vec<u8>>, String> {
        match self {
            Kind::Secret => {
                let text = secret_text(raw.pop().unwrap_or_default())?;
                Ok(vec![text.into_bytes()])
            }
            Kind::Certificates => {
                certificates(raw.first().map_or(&[][..], Vec::as_slice))?;
                Ok(raw)
            }
            Kind::CertificateAndKey => match raw.as_slice() {
                [cert, key] => certified_key(cert, key)
                    .map(|_| raw)
                    .map_err(|p| p.to_string()),
                _ => Err("a certificate needs its key".into()),
            },
        }
    }
}

/// How a look at a changed file ended, the `outcome` label of `credential_reloads_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Outcome {
    /// The new content is in use from the next connection on.
    Applied,
    /// It could not be read or used: the last good content stays.
    Failed,
}

impl Outcome {
    pub const ALL: [Outcome; 2] = [Outcome::Applied, Outcome::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Failed => "failed",
        }
    }
}

/// A credential as it is now: given once (inline, from the environment, in a test), or the
/// last good content of watched files. Its parts follow its kind: a secret's text; a CA
/// bundle; a certificate chain, then its key. Read it at each use, not once.
#[derive(Clone)]
pub enum Current {
    Fixed(Arc<Vec<Vec<u8>>>),
    Watched(Arc<Live>),
}

impl Current {
    pub fn fixed(parts: Vec<Vec<u8>>) -> Self {
        Current::Fixed(Arc::new(parts))
    }

    /// The content now, whole (a certificate and its key from the same look).
    pub fn parts(&self) -> Arc<Vec<Vec<u8>>> {
        match self {
            Current::Fixed(p) => p.clone(),
            Current::Watched(l) => lock(&l.state).parts.clone(),
        }
    }

    /// The first part as text: a secret.
    pub fn text(&self) -> String {
        let parts = self.parts();
        String::from_utf8_lossy(parts.first().map_or(&[][..], Vec::as_slice)).into_owned()
    }

    /// How many times new content was taken in: users that build something from it (a
    /// client, a TLS configuration) build again when this moves. 0 for a fixed value.
    pub fn generation(&self) -> u64 {
        match self {
            Current::Fixed(_) => 0,
            Current::Watched(l) => lock(&l.state).generation,
        }
    }
}

impl From<&str> for Current {
    fn from(text: &str) -> Self {
        Current::fixed(vec![text.as_bytes().to_vec()])
    }
}

impl From<Vec<u8>> for Current {
    fn from(bytes: Vec<u8>) -> Self {
        Current::fixed(vec![bytes])
    }
}

/// Never the content: these values are secrets or keys.
impl std::fmt::Debug for Current {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Current::Fixed(_) => f.write_str("<withheld>"),
            Current::Watched(l) => write!(f, "<withheld, watched: {}>", l.files()),
        }
    }
}

/// One watched file set and its last good content.
pub struct Live {
    kind: Kind,
    paths: Vec<PathBuf>,
    state: Mutex<State>,
}

struct State {
    parts: Arc<Vec<Vec<u8>>>,
    /// Of what was last read well; a look that reads the same changes nothing.
    digest: u64,
    generation: u64,
    /// Digest of the read or the problem last refused, so each is said once.
    refused: Option<u64>,
}

/// A look's result, for tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Looked {
    Unchanged,
    Changed(Outcome),
}

impl Live {
    fn first_read(kind: Kind, paths: &[&Path]) -> Result<Live, String> {
        let live = Live {
            kind,
            paths: paths.iter().map(|p| p.to_path_buf()).collect(),
            state: Mutex::new(State {
                parts: Arc::new(Vec::new()),
                digest: 0,
                generation: 0,
                refused: None,
            }),
        };
        let raw = live.read()?;
        let digest = digest(raw.iter().map(Vec::as_slice));
        let parts = kind
            .check(raw)
            .map_err(|why| format!("{}: {why}", live.files()))?;
        {
            let mut s = lock(&live.state);
            s.parts = Arc::new(parts);
            s.digest = digest;
        }
        Ok(live)
    }

    fn files(&self) -> String {
        let shown: Vec<String> = self.paths.iter().map(|p| p.display().to_string()).collect();
        shown.join(", ")
    }

    /// Every file, read whole (bounded), or the first problem.
    fn read(&self) -> Result<Vec<Vec<u8>>, String> {
        self.paths
            .iter()
            .map(|p| {
                read_bounded(p, self.kind.max_bytes()).map_err(|e| format!("{}: {e}", p.display()))
            })
            .collect()
    }

    /// Reads the files again and takes in new content that checks well; says once, and
    /// counts, each change taken in or refused.
    pub fn look(&self) -> Looked {
        let read = self.read();
        let attempt = match &read {
            Ok(raw) => digest(raw.iter().map(Vec::as_slice)),
            Err(why) => digest([why.as_bytes()]),
        };
        {
            let mut s = lock(&self.state);
            if read.is_ok() && attempt == s.digest {
                if s.refused.take().is_some() {
                    tracing::info!(kind = self.kind.as_str(), files = %self.files(), "credential file readable again, its content unchanged");
                }
                return Looked::Unchanged;
            }
            if s.refused == Some(attempt) {
                return Looked::Unchanged;
            }
        }
        let checked = read.and_then(|raw| self.kind.check(raw));
        let mut s = lock(&self.state);
        let outcome = match checked {
            // Only the bytes around it changed (a trailing newline): nothing to do again.
            Ok(parts) if *s.parts == parts => {
                s.digest = attempt;
                s.refused = None;
                return Looked::Unchanged;
            }
            Ok(parts) => {
                s.parts = Arc::new(parts);
                s.digest = attempt;
                s.generation += 1;
                s.refused = None;
                tracing::info!(kind = self.kind.as_str(), files = %self.files(), "credential file changed: the next connection uses the new content");
                Outcome::Applied
            }
            Err(why) => {
                s.refused = Some(attempt);
                tracing::warn!(kind = self.kind.as_str(), files = %self.files(), problem = %why, "credential file changed but cannot be used: the last good content stays in use");
                Outcome::Failed
            }
        };
        count(self.kind, outcome);
        Looked::Changed(outcome)
    }
}

/// The watched credential of `paths` (one file, or a certificate and its key), read now.
/// One per file set for the whole process: a set already in use is looked at again and
/// shared, so a cluster started again by a reload gets what is on disk. `Err` when the
/// files cannot be read or used and nothing good was read before.
pub fn watch(kind: Kind, paths: &[&Path]) -> Result<Current, String> {
    if let Some(live) = find(&mut lock(registry()), kind, paths) {
        live.look();
        return Ok(Current::Watched(live));
    }
    let live = Arc::new(Live::first_read(kind, paths)?);
    let mut registry = lock(registry());
    // Read outside the lock: another user may have registered the same files meanwhile.
    if let Some(other) = find(&mut registry, kind, paths) {
        return Ok(Current::Watched(other));
    }
    registry.push(Arc::downgrade(&live));
    Ok(Current::Watched(live))
}

/// A secret as its users read it at each use: watched when it came from a file (`*_file`),
/// fixed otherwise.
pub fn secret(secret: &super::types::Secret) -> Result<Current, String> {
    match secret.file() {
        Some(file) => watch(Kind::Secret, &[file]),
        None => Ok(Current::from(secret.expose())),
    }
}

/// How a [`Remade`] is made from a credential's parts.
type Make<T> = dyn Fn(&[Vec<u8>]) -> Result<T, String> + Send + Sync;

/// Something made from a watched credential, as an HTTP client that trusts a CA file:
/// made again when the credential took new content, and only then, so every use between
/// two changes shares one (a client per generation, not per request). When the new
/// content cannot be made into one, the last stays in use and the log says why.
pub struct Remade<T> {
    source: Current,
    what: String,
    make: Box<Make<T>>,
    made: Mutex<(u64, T)>,
}

impl<T: Clone> Remade<T> {
    /// Made now from what `source` holds; `Err` when that cannot be made. `what` names it
    /// in the log.
    pub fn new(
        source: Current,
        what: impl Into<String>,
        make: impl Fn(&[Vec<u8>]) -> Result<T, String> + Send + Sync + 'static,
    ) -> Result<Self, String> {
        let generation = source.generation();
        let first = make(&source.parts())?;
        Ok(Remade {
            source,
            what: what.into(),
            make: Box::new(make),
            made: Mutex::new((generation, first)),
        })
    }

    /// The one made from what the credential holds now.
    pub fn get(&self) -> T {
        let generation = self.source.generation();
        let mut made = lock(&self.made);
        if made.0 != generation {
            made.0 = generation;
            match (self.make)(&self.source.parts()) {
                Ok(t) => made.1 = t,
                Err(why) => {
                    tracing::warn!(what = %self.what, problem = %why, "cannot make anew from a changed credential file: the last one stays in use")
                }
            }
        }
        made.1.clone()
    }
}

/// The file set in use for `kind` and `paths`; forgets those no longer used.
fn find(registry: &mut Vec<Weak<Live>>, kind: Kind, paths: &[&Path]) -> Option<Arc<Live>> {
    registry.retain(|w| w.strong_count() > 0);
    registry.iter().filter_map(Weak::upgrade).find(|l| {
        l.kind == kind
            && l.paths
                .iter()
                .map(PathBuf::as_path)
                .eq(paths.iter().copied())
    })
}

/// Looks at every file set still in use once.
pub fn look_all() {
    let live: Vec<Arc<Live>> = {
        let mut registry = lock(registry());
        registry.retain(|w| w.strong_count() > 0);
        registry.iter().filter_map(Weak::upgrade).collect()
    };
    for l in live {
        l.look();
    }
}

/// Starts the thread that looks at every watched file set each [`EVERY`]; once per
/// process, whoever asks again.
pub fn start_watcher() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        let spawned = std::thread::Builder::new()
            .name("credential-watch".into())
            .spawn(|| loop {
                std::thread::sleep(EVERY);
                look_all();
            });
        if let Err(e) = spawned {
            tracing::error!(error = %e, "cannot start the credential watcher: rotated credentials are used only after a restart");
        }
    });
}

/// `credential_reloads_total`: (kind, outcome, changes) for every kind and outcome.
pub fn reload_counts() -> Vec<(&'static str, &'static str, u64)> {
    let counts = lock(&COUNTS);
    Kind::ALL
        .iter()
        .flat_map(|k| Outcome::ALL.iter().map(move |o| (*k, *o)))
        .map(|(k, o)| {
            let n = counts
                .iter()
                .find(|(key, _)| *key == (k, o))
                .map_or(0, |(_, n)| *n);
            (k.as_str(), o.as_str(), n)
        })
        .collect()
}

static COUNTS: Mutex<Vec<((Kind, Outcome), u64)>> = Mutex::new(Vec::new());

fn count(kind: Kind, outcome: Outcome) {
    let mut counts = lock(&COUNTS);
    match counts.iter_mut().find(|(key, _)| *key == (kind, outcome)) {
        Some((_, n)) => *n += 1,
        None => counts.push(((kind, outcome), 1)),
    }
}

fn registry() -> &'static Mutex<Vec<Weak<Live>>> {
    static REGISTRY: Mutex<Vec<Weak<Live>>> = Mutex::new(Vec::new());
    &REGISTRY
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn digest<'a>(parts: impl IntoIterator<Item = &'a [u8]>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    for p in parts {
        p.hash(&mut h);
    }
    h.finish()
}

/// A file read whole, refused past `max` bytes.
pub(crate) fn read_bounded(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(std::io::Error::other(format!("larger than {max} bytes")));
    }
    Ok(bytes)
}

/// A secret file's value: UTF-8, one trailing newline dropped (editors and `echo` add it,
/// and no credential ends in one), not empty.
pub(crate) fn secret_text(bytes: Vec<u8>) -> Result<String, String> {
    let Ok(mut value) = String::from_utf8(bytes) else {
        return Err("is not UTF-8 text".into());
    };
    if value.ends_with('\n') {
        value.pop();
        if value.ends_with('\r') {
            value.pop();
        }
    }
    if value.is_empty() {
        return Err("is empty".into());
    }
    Ok(value)
}

/// The certificates of a PEM bundle; at least one.
pub(crate) fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not valid PEM: {e}"))?;
    if certs.is_empty() {
        return Err("holds no CERTIFICATE block".into());
    }
    Ok(certs)
}

/// Why a certificate and key cannot be served together.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum PairProblem {
    Certificate(String),
    Key(String),
    /// The key is not the certificate's.
    Mismatch,
}

impl std::fmt::Display for PairProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PairProblem::Certificate(m) => write!(f, "certificate {m}"),
            PairProblem::Key(m) => write!(f, "key {m}"),
            PairProblem::Mismatch => f.write_str("the key is not the certificate's"),
        }
    }
}

/// A certificate chain (PEM, the leaf first) and its private key (PEM: PKCS#8, PKCS#1 or
/// SEC1, unencrypted), parsed and found to go together.
pub(crate) fn certified_key(cert_pem: &[u8], key_pem: &[u8]) -> Result<CertifiedKey, PairProblem> {
    let chain = certificates(cert_pem).map_err(PairProblem::Certificate)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
        PairProblem::Key(match e {
            tokio_rustls::rustls::pki_types::pem::Error::NoItemsFound => {
                "holds no private key block (an encrypted key is not accepted)".into()
            }
            other => format!("not a valid PEM private key: {other}"),
        })
    })?;
    CertifiedKey::from_der(chain, key, &ring_provider::default_provider()).map_err(|e| match e {
        Error::InvalidCertificate(_) => {
            PairProblem::Certificate(format!("unusable certificate: {e}"))
        }
        Error::InconsistentKeys(_) => PairProblem::Mismatch,
        other => PairProblem::Key(format!("unusable key: {other}")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const TESTDATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/observe/wire/testdata");

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kw-live-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn testdata(name: &str) -> Vec<u8> {
        std::fs::read(format!("{TESTDATA}/{name}")).unwrap()
    }

    /// A watched file set of this test's own: the registry's (`watch`) are also looked at
    /// by the other tests' `look_all`, which would take a change in before this one looks.
    fn own(kind: Kind, paths: &[&Path]) -> (Arc<Live>, Current) {
        let live = Arc::new(Live::first_read(kind, paths).unwrap());
        (live.clone(), Current::Watched(live))
    }

    fn counted(kind: Kind, outcome: Outcome) -> u64 {
        reload_counts()
            .into_iter()
            .find(|(k, o, _)| *k == kind.as_str() && *o == outcome.as_str())
            .map_or(0, |(_, _, n)| n)
    }

    #[test]
    fn a_changed_secret_is_taken_in_once_and_an_unchanged_one_never() {
        let d = dir("once");
        let file = d.join("password");
        std::fs::write(&file, "first\n").unwrap();
        let (live, current) = own(Kind::Secret, &[&file]);
        assert_eq!(current.text(), "first", "one trailing newline dropped");
        assert_eq!(current.generation(), 0);
        assert_eq!(live.look(), Looked::Unchanged);

        let applied = counted(Kind::Secret, Outcome::Applied);
        std::fs::write(&file, "second").unwrap();
        assert_eq!(live.look(), Looked::Changed(Outcome::Applied));
        assert_eq!(current.text(), "second");
        assert_eq!(current.generation(), 1);
        assert!(counted(Kind::Secret, Outcome::Applied) > applied);
        assert_eq!(live.look(), Looked::Unchanged, "once per change");
        // Only a trailing newline more: the same secret, nothing for users to redo.
        std::fs::write(&file, "second\n").unwrap();
        assert_eq!(live.look(), Looked::Unchanged);
        assert_eq!(current.generation(), 1);

        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_file_set_is_watched_once_and_looked_at_again_when_asked_for() {
        let d = dir("shared");
        let file = d.join("secret");
        std::fs::write(&file, "first").unwrap();
        let one = watch(Kind::Secret, &[&file]).unwrap();
        std::fs::write(&file, "second").unwrap();
        let two = watch(Kind::Secret, &[&file]).unwrap();
        assert_eq!(two.text(), "second");
        assert_eq!(one.text(), "second", "one watched credential, shared");
        let (Current::Watched(a), Current::Watched(b)) = (&one, &two) else {
            panic!("files are watched")
        };
        assert!(Arc::ptr_eq(a, b));
        // Nobody uses it any more: the watcher forgets it.
        drop((one, two));
        assert!(find(&mut lock(registry()), Kind::Secret, &[&file]).is_none());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_kubernetes_secret_swapped_under_its_link_is_followed() {
        let d = dir("swap");
        let mount = kafka_watchdog_test_support::secret_volume::write;
        mount(&d, "2026_12_01", &[("password", b"before")]).unwrap();
        let file = d.join("password");
        let current = watch(Kind::Secret, &[&file]).unwrap();
        assert_eq!(current.text(), "before");
        mount(&d, "2026_12_02", &[("password", b"after")]).unwrap();
        assert!(!d.join("..2026_12_01").exists(), "the old folder is gone");
        look_all();
        assert_eq!(current.text(), "after");
        assert_eq!(current.generation(), 1);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_failed_read_keeps_the_last_good_content_and_is_said_once() {
        let d = dir("failed");
        let file = d.join("ca.crt");
        std::fs::write(&file, testdata("ca.pem")).unwrap();
        let (live, current) = own(Kind::Certificates, &[&file]);
        let failed = counted(Kind::Certificates, Outcome::Failed);
        std::fs::write(&file, "not a certificate").unwrap();
        assert_eq!(live.look(), Looked::Changed(Outcome::Failed));
        assert_eq!(
            live.look(),
            Looked::Unchanged,
            "the same problem is said once"
        );
        assert_eq!(current.parts()[0], testdata("ca.pem"));
        assert_eq!(current.generation(), 0);
        assert!(counted(Kind::Certificates, Outcome::Failed) > failed);
        // Gone (a swap caught half-way): another problem, the same last good content.
        std::fs::remove_file(&file).unwrap();
        assert_eq!(live.look(), Looked::Changed(Outcome::Failed));
        assert_eq!(current.parts()[0], testdata("ca.pem"));
        // Back as it was: nothing to take in.
        std::fs::write(&file, testdata("ca.pem")).unwrap();
        assert_eq!(live.look(), Looked::Unchanged);
        std::fs::write(&file, testdata("renewed-ca.pem")).unwrap();
        assert_eq!(live.look(), Looked::Changed(Outcome::Applied));
        assert_eq!(current.parts()[0], testdata("renewed-ca.pem"));
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn a_certificate_and_key_are_taken_in_together_or_not_at_all() {
        let d = dir("pair");
        let (cert, key) = (d.join("tls.crt"), d.join("tls.key"));
        std::fs::write(&cert, testdata("server.pem")).unwrap();
        std::fs::write(&key, testdata("server.key")).unwrap();
        let (live, current) = own(Kind::CertificateAndKey, &[&cert, &key]);
        // The certificate renewed, its key not yet written: not a pair, not used.
        std::fs::write(&cert, testdata("renewed-server.pem")).unwrap();
        assert_eq!(live.look(), Looked::Changed(Outcome::Failed));
        assert_eq!(
            *current.parts(),
            vec![testdata("server.pem"), testdata("server.key")]
        );
        std::fs::write(&key, testdata("renewed-server.key")).unwrap();
        assert_eq!(live.look(), Looked::Changed(Outcome::Applied));
        assert_eq!(
            *current.parts(),
            vec![
                testdata("renewed-server.pem"),
                testdata("renewed-server.key")
            ]
        );
        // Nothing usable at first: an error, nothing watched.
        std::fs::write(&key, testdata("server.key")).unwrap();
        let err = watch(
            Kind::CertificateAndKey,
            &[&d.join("tls.crt"), &d.join("none")],
        );
        assert!(err.is_err());
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn every_kind_and_outcome_is_counted_from_zero() {
        let counts = reload_counts();
        assert_eq!(counts.len(), Kind::ALL.len() * Outcome::ALL.len());
        assert!(counts
            .iter()
            .any(|(k, o, _)| *k == "certificate_and_key" && *o == "failed"));
    }
}
