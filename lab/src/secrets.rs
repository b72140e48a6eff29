//! Certificates and passwords for a lab whose client listener is SASL_SSL: a throw-away CA,
//! one PKCS#12 keystore per broker (its certificate names its loopback address), random
//! passwords. Everything lives in the lab folder and goes with `down`.
//!
//! The brokers' certificates are valid for `DEFAULT_CERT_DAYS` days unless the lab is set
//! up with another validity (`kafka-lab up --cert-days N`), and one broker's certificate can
//! be issued again with any validity (`kafka-lab cert N --days D`, `Lab::reissue_cert`).
//! The CA itself is valid for `CA_DAYS`, so that a broker's own certificate is always the
//! first to expire in its chain.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::LabError;
use crate::sys::run;

/// The SASL user the watchdog authenticates as.
pub const WATCHDOG_USER: &str = "watchdog";

/// How long the brokers' certificates are valid when the lab is set up without
/// `--cert-days`: a year, beyond the watchdog's warning (14 days), so that a lab's own
/// certificates raise no incident; a test that wants one issues a short one
/// (`kafka-lab cert N --days D`). It was 7 until the watchdog read certificates.
pub const DEFAULT_CERT_DAYS: u32 = 365;
/// The lab CA's files, `ca.pem` and `ca.key`, by name.
pub const LAB_CA: &str = "ca";
/// A second CA, for a CA rotation (`kafka-lab cert N --second-ca`): `ca2.pem`, `ca2.key`.
pub const SECOND_CA: &str = "ca2";

/// How long the lab CA is valid: far beyond any broker certificate, so a chain's expiry is
/// its broker certificate's.
pub const CA_DAYS: u32 = 3650;

pub struct Secrets {
    pub dir: PathBuf,
    pub watchdog_password: String,
    pub keystore_password: String,
}

fn random_hex(bytes: usize) -> Result<String, LabError> {
    let mut buf = vec![0u8; bytes];
    let path = Path::new("/dev/urandom");
    fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| LabError::io(path, e))?;
    Ok(buf.iter().map(|b| format!("{b:02x}")).collect())
}

/// A password like the lab's own: 32 hex digits from the kernel's random source.
pub fn random_password() -> Result<String, LabError> {
    random_hex(16)
}

fn write(path: &Path, text: &str) -> Result<(), LabError> {
    fs::write(path, text).map_err(|e| LabError::io(path, e))
}

fn read(path: &Path) -> Result<String, LabError> {
    fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .map_err(|e| LabError::io(path, e))
}

impl Secrets {
    pub fn dir(lab_dir: &Path) -> PathBuf {
        lab_dir.join("secrets")
    }

    /// Reads the secrets of an existing lab.
    pub fn load(lab_dir: &Path) -> Result<Secrets, LabError> {
        let dir = Self::dir(lab_dir);
        Ok(Secrets {
            watchdog_password: read(&dir.join("watchdog.password"))?,
            keystore_password: read(&dir.join("keystore.password"))?,
            dir,
        })
    }

    /// Replaces the watchdog's password file whole: a new file renamed over it, so a
    /// reader never sees it half written (as a Kubernetes Secret's update).
    pub fn replace_watchdog_password(lab_dir: &Path, password: &str) -> Result<(), LabError> {
        let dir = Self::dir(lab_dir);
        let (file, tmp) = (
            dir.join("watchdog.password"),
            dir.join("watchdog.password.new"),
        );
        write(&tmp, password)?;
        fs::rename(&tmp, &file).map_err(|e| LabError::io(&file, e))
    }

    /// Makes a CA, a keystore for each broker (certificates valid for
    /// `DEFAULT_CERT_DAYS`) and the passwords.
    pub fn create(lab_dir: &Path, brokers: &[(i32, String)]) -> Result<Secrets, LabError> {
        Self::create_with(lab_dir, brokers, DEFAULT_CERT_DAYS)
    }

    /// Makes a CA, a keystore for each broker whose certificate is valid for `cert_days`
    /// days from now, and the passwords.
    pub fn create_with(
        lab_dir: &Path,
        brokers: &[(i32, String)],
        cert_days: u32,
    ) -> Result<Secrets, LabError> {
        let dir = Self::dir(lab_dir);
        fs::create_dir_all(&dir).map_err(|e| LabError::io(&dir, e))?;
        let s = Secrets {
            watchdog_password: random_hex(16)?,
            keystore_password: random_hex(12)?,
            dir,
        };
        write(&s.dir.join("watchdog.password"), &s.watchdog_password)?;
        write(&s.dir.join("keystore.password"), &s.keystore_password)?;
        let p = |name: &str| s.dir.join(name).display().to_string();
        run(
            "openssl",
            &[
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                &CA_DAYS.to_string(),
                "-subj",
                "/CN=kafka-lab test CA",
                "-keyout",
                &p("ca.key"),
                "-out",
                &p("ca.pem"),
            ],
        )?;
        for (id, host) in brokers {
            s.broker_keystore_valid_for(*id, host, cert_days)?;
        }
        Ok(s)
    }

    /// A key and certificate for broker `id` at `host`, signed by the lab CA, as PKCS#12,
    /// valid for `DEFAULT_CERT_DAYS`.
    pub fn broker_keystore(&self, id: i32, host: &str) -> Result<(), LabError> {
        self.broker_keystore_valid_for(id, host, DEFAULT_CERT_DAYS)
    }

    /// A new key and certificate for broker `id` at `host`, signed by the lab CA and valid
    /// for `days` days from now (0: its end is its start, expired at once), as PKCS#12 under
    /// the keystore password, replacing the broker's files (same names) only once all of
    /// them are made. A running broker keeps the keystore it loaded until it restarts.
    pub fn broker_keystore_valid_for(
        &self,
        id: i32,
        host: &str,
        days: u32,
    ) -> Result<(), LabError> {
        self.broker_keystore_signed(id, host, days, LAB_CA)
    }

    /// As `broker_keystore_valid_for`, signed by the CA whose files are `<ca>.pem` and
    /// `<ca>.key` ([`LAB_CA`], or [`SECOND_CA`] once `ensure_second_ca` made it).
    pub fn broker_keystore_signed(
        &self,
        id: i32,
        host: &str,
        days: u32,
        ca: &str,
    ) -> Result<(), LabError> {
        let p = |name: String| self.dir.join(name).display().to_string();
        // Made under new names, then renamed over the broker's: a failed openssl leaves the
        // keystore in place.
        let key = p(format!("broker{id}.key.new"));
        let csr = p(format!("broker{id}.csr"));
        let pem = p(format!("broker{id}.pem.new"));
        let p12 = p(format!("broker{id}.p12.new"));
        let ext = p(format!("broker{id}.ext"));
        write(
            Path::new(&ext),
            &format!("subjectAltName=IP:{host},DNS:localhost\n"),
        )?;
        run(
            "openssl",
            &[
                "req",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-subj",
                &format!("/CN=kafka-lab broker {id}"),
                "-keyout",
                &key,
                "-out",
                &csr,
            ],
        )?;
        run(
            "openssl",
            &[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                &p(format!("{ca}.pem")),
                "-CAkey",
                &p(format!("{ca}.key")),
                "-CAcreateserial",
                "-days",
                &days.to_string(),
                "-extfile",
                &ext,
                "-out",
                &pem,
            ],
        )?;
        run(
            "openssl",
            &[
                "pkcs12",
                "-export",
                "-in",
                &pem,
                "-inkey",
                &key,
                "-certfile",
                &p(format!("{ca}.pem")),
                "-name",
                "broker",
                "-out",
                &p12,
                "-passout",
                &format!("pass:{}", self.keystore_password),
            ],
        )?;
        for (new, name) in [
            (key, format!("broker{id}.key")),
            (pem, format!("broker{id}.pem")),
            (p12, format!("broker{id}.p12")),
        ] {
            let to = self.dir.join(name);
            fs::rename(&new, &to).map_err(|e| LabError::io(&to, e))?;
        }
        Ok(())
    }

    /// The end of broker `id`'s certificate validity as openssl prints it
    /// (`Dec  5 09:18:57 2026 GMT`), read from its PEM file (what the broker presents once
    /// it has started with its keystore).
    pub fn cert_end(&self, id: i32) -> Result<String, LabError> {
        let pem = self.dir.join(format!("broker{id}.pem"));
        let out = run(
            "openssl",
            &[
                "x509",
                "-noout",
                "-enddate",
                "-in",
                &pem.display().to_string(),
            ],
        )?;
        Ok(out
            .trim()
            .strip_prefix("notAfter=")
            .unwrap_or(out.trim())
            .to_string())
    }

    pub fn keystore(&self, id: i32) -> PathBuf {
        self.dir.join(format!("broker{id}.p12"))
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join(format!("{LAB_CA}.pem"))
    }

    /// The lab's second CA (`kafka-lab cert N --second-ca`), once made.
    pub fn second_ca(&self) -> PathBuf {
        self.dir.join(format!("{SECOND_CA}.pem"))
    }

    /// Makes the second CA unless it exists; its name for `broker_keystore_signed`.
    pub fn ensure_second_ca(&self) -> Result<&'static str, LabError> {
        if !self.second_ca().exists() {
            let p = |ext: &str| {
                self.dir
                    .join(format!("{SECOND_CA}{ext}"))
                    .display()
                    .to_string()
            };
            run(
                "openssl",
                &[
                    "req",
                    "-x509",
                    "-newkey",
                    "rsa:2048",
                    "-nodes",
                    "-days",
                    &CA_DAYS.to_string(),
                    "-subj",
                    "/CN=kafka-lab second test CA",
                    "-keyout",
                    &p(".key"),
                    "-out",
                    &p(".pem.new"),
                ],
            )?;
            // Named last: a half-made CA is never taken for one.
            fs::rename(p(".pem.new"), self.second_ca())
                .map_err(|e| LabError::io(&self.second_ca(), e))?;
        }
        Ok(SECOND_CA)
    }
}
