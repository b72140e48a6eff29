//! The certificate a broker's TLS listener presented: its expiry, subject and issuer, read
//! from the leaf of the chain after the handshake (which checked it as configured). Kafka
//! reloads a listener's keystore without a restart only when told to, so a certificate that
//! expires takes every new client connection with it at once: its date is worth watching.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use x509_parser::prelude::{FromDer, X509Certificate};

pub use crate::model::round::PeerCertificate;

/// The leaf certificate's facts; `None` when it cannot be parsed (the handshake accepted
/// it, so that is a parser gap, never a reason to fail the connection).
pub(crate) fn read(der: &[u8], checked_name: &str) -> Option<PeerCertificate> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    let seconds = cert.validity().not_after.timestamp();
    let not_after = if seconds >= 0 {
        UNIX_EPOCH + Duration::from_secs(seconds.unsigned_abs())
    } else {
        UNIX_EPOCH
    };
    let name = |n: &x509_parser::x509::X509Name<'_>| {
        n.iter_common_name()
            .next()
            .and_then(|cn| cn.as_str().ok().map(str::to_string))
            .unwrap_or_else(|| n.to_string())
    };
    Some(PeerCertificate {
        not_after,
        subject: name(cert.subject()),
        issuer: name(cert.issuer()),
        checked_name: checked_name.to_string(),
    })
}

/// How long until `c` expires from `now`; zero once it has.
pub fn remaining(c: &PeerCertificate, now: SystemTime) -> Duration {
    c.not_after.duration_since(now).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A self-signed certificate made with `openssl req -x509 -newkey ec -pkeyopt
    /// ec_paramgen_curve:P-256 -nodes -days 30 -subj /CN=broker-2 -outform DER`, valid
    /// until 2027-01-03 09:17:39 UTC.
    const DER_HEX: &str = include_str!("testdata/broker-2-cert.der.hex");

    fn der() -> Vec<u8> {
        let hex: String = DER_HEX.chars().filter(|c| c.is_ascii_hexdigit()).collect();
        (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect()
    }

    #[test]
    fn expiry_subject_and_issuer_are_read_from_the_leaf() {
        let c = read(&der(), "127.0.0.12").expect("parses");
        assert_eq!(c.subject, "broker-2");
        assert_eq!(c.issuer, "broker-2");
        assert_eq!(c.checked_name, "127.0.0.12");
        let expected = UNIX_EPOCH + Duration::from_secs(1_798_967_859);
        assert_eq!(c.not_after, expected);
        assert_eq!(
            remaining(&c, expected - Duration::from_secs(3600)),
            Duration::from_secs(3600)
        );
        assert_eq!(
            remaining(&c, expected + Duration::from_secs(1)),
            Duration::ZERO
        );
    }

    #[test]
    fn garbage_is_none_not_a_panic() {
        assert!(read(&[], "x").is_none());
        assert!(read(&[0x30, 0x82, 0xff, 0xff, 1, 2, 3], "x").is_none());
        let mut cut = der();
        cut.truncate(cut.len() / 2);
        assert!(read(&cut, "x").is_none());
    }
}
