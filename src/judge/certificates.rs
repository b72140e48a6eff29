//! The certificates the brokers' TLS listeners present: when each expires, measured
//! against the `certificates:` thresholds, and whether the brokers of one cluster present
//! certificates of different issuers (a half-finished rotation, a broker left on an old
//! CA). A certificate that expires takes every new client connection of that broker with
//! it, at once, while the broker itself is fine: a warning two weeks ahead, critical two
//! days ahead. Pure: the certificates seen and `now` come in.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, SystemTime};

use serde::Serialize;

use crate::config::CertificatesConfig;
use crate::model::round::{BrokerId, PeerCertificate};

/// How close to its expiry a certificate is worth an incident.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertificateRules {
    pub warning: Duration,
    pub critical: Duration,
}

impl From<&CertificatesConfig> for CertificateRules {
    fn from(c: &CertificatesConfig) -> Self {
        let days = |n: u64| Duration::from_secs(n * 86_400);
        CertificateRules {
            warning: days(c.warning_days),
            critical: days(c.critical_days),
        }
    }
}

/// The key table's defaults (`certificates.warning_days`, `critical_days`).
impl Default for CertificateRules {
    fn default() -> Self {
        CertificateRules::from(&CertificatesConfig::default())
    }
}

/// How urgent a certificate is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Urgency {
    Fine,
    /// Within `warning_days`.
    Expiring,
    /// Within `critical_days`, or expired.
    ExpiringSoon,
}

/// One broker's listener certificate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BrokerCertificate {
    pub broker: BrokerId,
    pub address: String,
    #[serde(skip)]
    pub certificate: PeerCertificate,
    /// When it was last presented (a broker that did not answer this round keeps the
    /// certificate it presented before).
    #[serde(skip)]
    pub seen_at: SystemTime,
    pub urgency: Urgency,
}

/// Every broker's certificate, when the cluster's listeners use TLS.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CertificatesReport {
    pub brokers: Vec<BrokerCertificate>,
    /// The distinct issuers, sorted: more than one is worth knowing.
    pub issuers: Vec<String>,
}

impl CertificatesReport {
    pub fn of(&self, broker: BrokerId) -> Option<&BrokerCertificate> {
        self.brokers.iter().find(|b| b.broker == broker)
    }
}

pub fn urgency(c: &PeerCertificate, rules: &CertificateRules, now: SystemTime) -> Urgency {
    let left = c.not_after.duration_since(now).unwrap_or_default();
    if left <= rules.critical {
        Urgency::ExpiringSoon
    } else if left <= rules.warning {
        Urgency::Expiring
    } else {
        Urgency::Fine
    }
}

/// The report from the certificates last seen per broker (`seen`: certificate, address,
/// when), for the brokers `present`; `None` when no broker presented one (no TLS).
pub fn judge_certificates(
    seen: &BTreeMap<BrokerId, (PeerCertificate, String, SystemTime)>,
    present: &BTreeSet<BrokerId>,
    rules: &CertificateRules,
    now: SystemTime,
) -> Option<CertificatesReport> {
    let brokers: Vec<BrokerCertificate> = seen
        .iter()
        .filter(|(id, _)| present.contains(id))
        .map(|(id, (c, address, at))| BrokerCertificate {
            broker: *id,
            address: address.clone(),
            certificate: c.clone(),
            seen_at: *at,
            urgency: urgency(c, rules, now),
        })
        .collect();
    if brokers.is_empty() {
        return None;
    }
    let issuers: BTreeSet<String> = brokers
        .iter()
        .map(|b| b.certificate.issuer.clone())
        .collect();
    Some(CertificatesReport {
        brokers,
        issuers: issuers.into_iter().collect(),
    })
}

/// "in 1.5 days, on 2026-12-05 09:00 UTC" or "1.5 days ago, on ...".
pub fn expiry_words(c: &PeerCertificate, now: SystemTime) -> String {
    let on = crate::model::time::rfc3339(c.not_after);
    match c.not_after.duration_since(now) {
        Ok(left) => format!("in {:.1} days, on {on}", left.as_secs_f64() / 86_400.0),
        Err(past) => format!(
            "{:.1} days ago, on {on}",
            past.duration().as_secs_f64() / 86_400.0
        ),
    }
}

pub mod metrics;

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(days: f64) -> SystemTime {
        let base = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        if days >= 0.0 {
            base + Duration::from_secs_f64(days * 86_400.0)
        } else {
            base - Duration::from_secs_f64(-days * 86_400.0)
        }
    }

    fn cert(expires_in_days: f64, issuer: &str) -> PeerCertificate {
        PeerCertificate {
            not_after: t(expires_in_days),
            subject: "broker".into(),
            issuer: issuer.into(),
            checked_name: "127.0.0.11".into(),
        }
    }

    #[test]
    fn urgency_follows_the_thresholds() {
        let r = CertificateRules::default();
        assert_eq!(urgency(&cert(30.0, "ca"), &r, t(0.0)), Urgency::Fine);
        assert_eq!(urgency(&cert(14.0, "ca"), &r, t(0.0)), Urgency::Expiring);
        assert_eq!(urgency(&cert(3.0, "ca"), &r, t(0.0)), Urgency::Expiring);
        assert_eq!(urgency(&cert(1.5, "ca"), &r, t(0.0)), Urgency::ExpiringSoon);
        assert_eq!(
            urgency(&cert(-1.0, "ca"), &r, t(0.0)),
            Urgency::ExpiringSoon
        );
    }

    #[test]
    fn only_present_brokers_count_and_issuers_are_listed_once() {
        let mut seen = BTreeMap::new();
        seen.insert(1, (cert(300.0, "lab CA"), "a:1".to_string(), t(0.0)));
        seen.insert(2, (cert(1.0, "lab CA"), "b:1".to_string(), t(0.0)));
        seen.insert(3, (cert(300.0, "old CA"), "c:1".to_string(), t(0.0)));
        let present: BTreeSet<BrokerId> = [1, 2].into();
        let r = judge_certificates(&seen, &present, &CertificateRules::default(), t(0.0)).unwrap();
        assert_eq!(r.brokers.len(), 2);
        assert_eq!(r.issuers, vec!["lab CA".to_string()]);
        assert_eq!(r.of(2).unwrap().urgency, Urgency::ExpiringSoon);
        let all: BTreeSet<BrokerId> = [1, 2, 3].into();
        let r = judge_certificates(&seen, &all, &CertificateRules::default(), t(0.0)).unwrap();
        assert_eq!(r.issuers.len(), 2);
        assert!(
            judge_certificates(&BTreeMap::new(), &all, &CertificateRules::default(), t(0.0))
                .is_none()
        );
    }

    #[test]
    fn expiry_is_said_ahead_and_behind() {
        let c = cert(1.5, "ca");
        assert!(expiry_words(&c, t(0.0)).starts_with("in 1.5 days, on "));
        assert!(expiry_words(&c, t(2.0)).starts_with("0.5 days ago, on "));
    }
}
