//! The client side of SCRAM (RFC 5802) with SHA-256 and SHA-512 (RFC 7677), as Kafka uses
//! it: no channel binding, no authorization identity.

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2};

/// Kafka refuses credentials above 16384 iterations; a server asking for far more is either
/// broken or trying to make the client burn CPU, so the bound is kept near Kafka's.
const MAX_ITERATIONS: u32 = 65_536;
/// The RFC's minimum; Kafka's own is the same.
const MIN_ITERATIONS: u32 = 4096;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    fn pbkdf2(self) -> pbkdf2::Algorithm {
        match self {
            ScramHash::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramHash::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    fn hmac(self) -> hmac::Algorithm {
        match self {
            ScramHash::Sha256 => hmac::HMAC_SHA256,
            ScramHash::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest(self) -> &'static digest::Algorithm {
        match self {
            ScramHash::Sha256 => &digest::SHA256,
            ScramHash::Sha512 => &digest::SHA512,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("SCRAM: {0}")]
pub(crate) struct ScramError(String);

fn fail<T>(detail: impl Into<String>) -> Result<T, ScramError> {
    Err(ScramError(detail.into()))
}

/// A fresh client nonce: 24 printable characters, none of them a comma.
pub(crate) fn new_nonce() -> Result<String, ScramError> {
    let mut raw = [0u8; 18];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut raw)
        .map_err(|_| ScramError("no system randomness for the nonce".to_owned()))?;
    Ok(BASE64.encode(raw))
}

pub(crate) struct ScramClient {
    hash: ScramHash,
    password: String,
    nonce: String,
    client_first_bare: String,
    /// Set once the client proof is sent: what the server's signature must match.
    expected: Option<(hmac::Key, String)>,
}

impl ScramClient {
    pub(crate) fn new(hash: ScramHash, username: &str, password: &str, nonce: String) -> Self {
        let client_first_bare = format!("n={},r={nonce}", escape_name(username));
        ScramClient {
            hash,
            password: password.to_owned(),
            nonce,
            client_first_bare,
            expected: None,
        }
    }

    /// The first message: GS2 header "n,," (no channel binding, no authzid), then the bare part.
    pub(crate) fn client_first(&self) -> Vec<u8> {
        format!("n,,{}", self.client_first_bare).into_bytes()
    }

    /// Reads the server's salt and iteration count and answers with the client proof.
    pub(crate) fn client_final(&mut self, server_first: &[u8]) -> Result<Vec<u8>, ScramError> {
        let server_first = std::str::from_utf8(server_first)
            .or_else(|_| fail("server-first-message is not UTF-8"))?;
        if server_first.starts_with("m=") {
            return fail("server requires an extension this client does not know");
        }
        if let Some(error) = server_first.strip_prefix("e=") {
            return fail(format!("server error {error}"));
        }
        let nonce = attribute(server_first, 'r')?;
        if !nonce.starts_with(&self.nonce) || nonce.len() == self.nonce.len() {
            return fail("server nonce does not extend the client nonce");
        }
        let salt = BASE64
            .decode(attribute(server_first, 's')?)
            .or_else(|_| fail("salt is not base64"))?;
        let iterations: u32 = attribute(server_first, 'i')?
            .parse()
            .or_else(|_| fail("iteration count is not a number"))?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return fail(format!(
                "iteration count {iterations} outside {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            ));
        }
        let iterations = std::num::NonZeroU32::new(iterations)
            .ok_or_else(|| ScramError("zero iterations".to_owned()))?;

        let mut salted = vec![0u8; self.hash.digest().output_len()];
        pbkdf2::derive(
            self.hash.pbkdf2(),
            iterations,
            &salt,
            self.password.as_bytes(),
            &mut salted,
        );
        let salted = hmac::Key::new(self.hash.hmac(), &salted);
        let client_key = hmac::sign(&salted, b"Client Key");
        let stored_key = digest::digest(self.hash.digest(), client_key.as_ref());
        let server_key = hmac::Key::new(
            self.hash.hmac(),
            hmac::sign(&salted, b"Server Key").as_ref(),
        );

        // "biws" is base64 of the GS2 header "n,," sent in the first message.
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let client_signature = hmac::sign(
            &hmac::Key::new(self.hash.hmac(), stored_key.as_ref()),
            auth_message.as_bytes(),
        );
        let proof: Vec<u8> = client_key
            .as_ref()
            .iter()
            .zip(client_signature.as_ref())
            .map(|(k, s)| k ^ s)
            .collect();
        self.expected = Some((server_key, auth_message));
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }

    /// Checks that the server knows the password too (mutual authentication).
    pub(crate) fn verify_server_final(&self, server_final: &[u8]) -> Result<(), ScramError> {
        let Some((server_key, auth_message)) = &self.expected else {
            return fail("server-final-message before the client proof");
        };
        let server_final = std::str::from_utf8(server_final)
            .or_else(|_| fail("server-final-message is not UTF-8"))?;
        if let Some(error) = server_final.strip_prefix("e=") {
            return fail(format!("server error {error}"));
        }
        let signature = BASE64
            .decode(attribute(server_final, 'v')?)
            .or_else(|_| fail("server signature is not base64"))?;
        hmac::verify(server_key, auth_message.as_bytes(), &signature).or_else(|_| {
            fail("server signature does not match: the broker does not know this password")
        })
    }
}

/// The value of `name=` in a SCRAM attribute list.
fn attribute(message: &str, name: char) -> Result<&str, ScramError> {
    message
        .split(',')
        .find_map(|part| {
            let mut chars = part.chars();
            (chars.next() == Some(name) && chars.next() == Some('=')).then(|| &part[2..])
        })
        .ok_or_else(|| ScramError(format!("attribute {name} missing")))
}

/// `=` and `,` are the only characters a SCRAM user name must escape.
fn escape_name(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3.
    #[test]
    fn rfc7677_sha256_exchange() {
        let mut client = ScramClient::new(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".to_owned(),
        );
        assert_eq!(client.client_first(), b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let reply = client
            .client_final(
                b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            )
            .unwrap();
        assert_eq!(
            String::from_utf8(reply).unwrap(),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
             p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        client
            .verify_server_final(b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .unwrap();
        let forged = client.verify_server_final(b"v=7rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
        assert!(forged.is_err());
        let refused = client.verify_server_final(b"e=invalid-proof").unwrap_err();
        assert!(refused.to_string().contains("invalid-proof"));
    }

    #[test]
    fn server_first_is_checked() {
        let fresh = || ScramClient::new(ScramHash::Sha512, "u", "p", "abc".to_owned());
        for (server_first, complaint) in [
            ("r=xyz,s=AAAA,i=4096", "does not extend"),
            ("r=abc,s=AAAA,i=4096", "does not extend"),
            ("r=abcd,s=@@@,i=4096", "base64"),
            ("r=abcd,s=AAAA,i=999999999", "iteration count"),
            ("r=abcd,s=AAAA,i=12", "iteration count"),
            ("r=abcd,s=AAAA", "attribute i missing"),
            ("m=ext,r=abcd,s=AAAA,i=4096", "extension"),
            ("e=other-error", "other-error"),
        ] {
            let err = fresh().client_final(server_first.as_bytes()).unwrap_err();
            assert!(err.to_string().contains(complaint), "{server_first}: {err}");
        }
        assert!(fresh().verify_server_final(b"v=AAAA").is_err());
    }

    #[test]
    fn names_are_escaped_and_nonces_are_safe() {
        let client = ScramClient::new(ScramHash::Sha256, "a=b,c", "p", "n".to_owned());
        assert_eq!(client.client_first(), b"n,,n=a=3Db=2Cc,r=n");
        let nonce = new_nonce().unwrap();
        assert_eq!(nonce.len(), 24);
        assert!(!nonce.contains(','));
        assert_ne!(nonce, new_nonce().unwrap());
    }
}
