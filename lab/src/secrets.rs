//! Certificates and passwords for a lab whose client listener is SASL_SSL: a throw-away CA,
//! one PKCS#12 keystore per broker (its certificate names its loopback address), random
//! passwords. Everything lives in the lab folder and goes with `down`.

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::error::LabError;
use crate::sys::run;

/// The SASL user the watchdog authenticates as.
pub const WATCHDOG_USER: &str = "watchdog";

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

    /// Makes a CA, a keystore for each broker and the passwords.
    pub fn create(lab_dir: &Path, brokers: &[(i32, String)]) -> Result<Secrets, LabError> {
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
                "7",
                "-subj",
                "/CN=kafka-lab test CA",
                "-keyout",
                &p("ca.key"),
                "-out",
                &p("ca.pem"),
            ],
        )?;
        for (id, host) in brokers {
            s.broker_keystore(*id, host)?;
        }
        Ok(s)
    }

    /// A key and certificate for broker `id` at `host`, signed by the lab CA, as PKCS#12.
    pub fn broker_keystore(&self, id: i32, host: &str) -> Result<(), LabError> {
        let p = |name: String| self.dir.join(name).display().to_string();
        let key = p(format!("broker{id}.key"));
        let csr = p(format!("broker{id}.csr"));
        let pem = p(format!("broker{id}.pem"));
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
                &p("ca.pem".into()),
                "-CAkey",
                &p("ca.key".into()),
                "-CAcreateserial",
                "-days",
                "7",
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
                &p("ca.pem".into()),
                "-name",
                "broker",
                "-out",
                &p(format!("broker{id}.p12")),
                "-passout",
                &format!("pass:{}", self.keystore_password),
            ],
        )?;
        Ok(())
    }

    pub fn keystore(&self, id: i32) -> PathBuf {
        self.dir.join(format!("broker{id}.p12"))
    }

    pub fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }
}
