//! The watchdog user's SCRAM-SHA-512 password changed on a running lab, as Strimzi's user
//! operator changes a KafkaUser's: AlterUserScramCredentials (API 51, Kafka 2.7+) through
//! a broker's plaintext listener, whose ANONYMOUS user the lab makes a super user. Kafka
//! keeps the credential in its metadata: every broker checks new logins against it at once;
//! connections already authenticated stay so.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::alter_user_scram_credentials_request::ScramCredentialUpsertion;
use kafka_protocol::messages::AlterUserScramCredentialsRequest;
use kafka_protocol::protocol::StrBytes;

use crate::error::LabError;

/// AlterUserScramCredentials mechanism 2 is SCRAM-SHA-512, the lab's.
const SCRAM_SHA_512: i8 = 2;
/// Kafka's minimum for SCRAM-SHA-512, as kafka-configs uses by default.
const ITERATIONS: u32 = 4096;

/// PBKDF2-HMAC-SHA512, which is SCRAM's Hi(): Kafka stores the salted password and derives
/// the stored and server keys from it.
fn salted_password(password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    let mut out = vec![0u8; 64];
    ring::pbkdf2::derive(
        ring::pbkdf2::PBKDF2_HMAC_SHA512,
        std::num::NonZeroU32::new(iterations).expect("iterations above 0"),
        salt,
        password.as_bytes(),
        &mut out,
    );
    out
}

/// Replaces `user`'s SCRAM-SHA-512 credential with one for `password` (a new random salt),
/// asking the broker at `address` (a plaintext listener).
pub fn set_password(address: &str, user: &str, password: &str) -> Result<(), LabError> {
    let fail = |what: String| {
        LabError::Kafka(format!(
            "AlterUserScramCredentials for {user} to {address}: {what}"
        ))
    };
    let mut salt = [0u8; 32];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut salt)
        .map_err(|_| fail("no random bytes for the salt".into()))?;
    let upsert = ScramCredentialUpsertion::default()
        .with_name(StrBytes::from_string(user.to_string()))
        .with_mechanism(SCRAM_SHA_512)
        .with_iterations(ITERATIONS as i32)
        .with_salt(Bytes::copy_from_slice(&salt))
        .with_salted_password(Bytes::from(salted_password(password, &salt, ITERATIONS)));
    let request = AlterUserScramCredentialsRequest::default().with_upsertions(vec![upsert]);
    // v0: every release with the request (2.7 on) speaks it.
    let answer =
        crate::request::call(address, &request, 0, Duration::from_secs(30)).map_err(fail)?;
    for r in &answer.results {
        if r.error_code != 0 {
            let message = r.error_message.as_ref().map_or("", |m| m.as_str());
            return Err(fail(format!("Kafka error {} {message}", r.error_code)));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn salted_password_is_pbkdf2_hmac_sha512() {
        // RFC 6070's first PBKDF2 vector, recomputed for HMAC-SHA512 (1 iteration).
        let out = salted_password("password", b"salt", 1);
        let hex: String = out.iter().map(|b| format!("{b:02x}")).collect();
        assert!(hex.starts_with("867f70cf1ade02cff3752599a3a53dc4af34c7a669815ae5"));
    }
}
