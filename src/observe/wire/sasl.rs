//! SASL over Kafka's own framing: SaslHandshake v1 names the mechanism, then SaslAuthenticate
//! carries each token. Tokens and passwords are never logged.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
};
use kafka_protocol::protocol::StrBytes;

use super::connection::Connection;
use super::error::{kafka_error_name, Phase, WireError};
use super::scram::{new_nonce, ScramClient, ScramHash};
use super::security::{SaslMechanism, SaslSettings};
use super::versions::SupportedVersions;
use super::{msk_iam, oauth};

/// SaslHandshake v0 sends the tokens without Kafka framing; only v1 and later use
/// SaslAuthenticate, which is all this client speaks (Kafka 1.0+).
const HANDSHAKE_WITH_AUTHENTICATE: i16 = 1;

fn refused(phase: Phase, detail: impl Into<String>) -> WireError {
    WireError::Authentication {
        phase,
        detail: detail.into(),
    }
}

/// Authenticates the connection. Returns the session lifetime the broker granted, after
/// which it closes the connection unless the client authenticates again (KIP-368).
pub(crate) async fn authenticate(
    conn: &mut Connection,
    versions: &SupportedVersions,
    settings: &SaslSettings,
    host: &str,
) -> Result<Option<Duration>, WireError> {
    let handshake_version = versions
        .for_request::<SaslHandshakeRequest>()
        .filter(|&v| v >= HANDSHAKE_WITH_AUTHENTICATE)
        .ok_or(WireError::Unsupported {
            phase: Phase::SaslHandshake,
        })?;
    let authenticate_version =
        versions
            .for_request::<SaslAuthenticateRequest>()
            .ok_or(WireError::Unsupported {
                phase: Phase::SaslAuthenticate,
            })?;

    let mechanism = settings.mechanism.as_str();
    let request =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism));
    let handshake = conn
        .call(Phase::SaslHandshake, &request, handshake_version)
        .await?
        .value;
    if handshake.error_code != 0 {
        let offered: Vec<&str> = handshake.mechanisms.iter().map(|m| m.as_str()).collect();
        return Err(refused(
            Phase::SaslHandshake,
            format!(
                "broker refused mechanism {mechanism} (Kafka error {} {}); it offers {offered:?}",
                handshake.error_code,
                kafka_error_name(handshake.error_code)
            ),
        ));
    }

    let last = match settings.mechanism {
        SaslMechanism::Plain => {
            let token = plain_token(&settings.username, &settings.password.text());
            exchange(conn, authenticate_version, token).await?
        }
        SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            scram(conn, authenticate_version, settings).await?
        }
        SaslMechanism::OAuthBearer => oauthbearer(conn, authenticate_version, settings).await?,
        SaslMechanism::AwsMskIam => aws_msk_iam(conn, authenticate_version, settings, host).await?,
    };
    let lifetime = u64::try_from(last.session_lifetime_ms)
        .ok()
        .filter(|&ms| ms > 0)
        .map(Duration::from_millis);
    tracing::debug!(
        mechanism,
        user = %principal(settings),
        session_lifetime_ms = lifetime.map(|d| d.as_millis() as u64),
        "SASL authentication succeeded"
    );
    Ok(lifetime)
}

/// SCRAM-SHA-256/512 (RFC 5802): client first, server first, client final, server final,
/// whose signature proves the server knew the password.
async fn scram(
    conn: &mut Connection,
    authenticate_version: i16,
    settings: &SaslSettings,
) -> Result<SaslAuthenticateResponse, WireError> {
    let hash = if settings.mechanism == SaslMechanism::ScramSha256 {
        ScramHash::Sha256
    } else {
        ScramHash::Sha512
    };
    let nonce = new_nonce().map_err(|e| refused(Phase::SaslAuthenticate, e.to_string()))?;
    let mut scram = ScramClient::new(hash, &settings.username, &settings.password.text(), nonce);
    let server_first = exchange(conn, authenticate_version, scram.client_first()).await?;
    let client_final = scram
        .client_final(&server_first.auth_bytes)
        .map_err(|e| refused(Phase::SaslAuthenticate, e.to_string()))?;
    let server_final = exchange(conn, authenticate_version, client_final).await?;
    scram
        .verify_server_final(&server_final.auth_bytes)
        .map_err(|e| refused(Phase::SaslAuthenticate, e.to_string()))?;
    Ok(server_final)
}

/// OAUTHBEARER (RFC 7628): the cluster's token, with its extensions; a rejected token's
/// error challenge is acknowledged as the RFC requires and its status reported.
async fn oauthbearer(
    conn: &mut Connection,
    authenticate_version: i16,
    settings: &SaslSettings,
) -> Result<SaslAuthenticateResponse, WireError> {
    let source = settings.oauth.as_ref().ok_or_else(|| {
        refused(
            Phase::SaslAuthenticate,
            "OAUTHBEARER without a token endpoint",
        )
    })?;
    let token = source
        .token()
        .await
        .map_err(|e| refused(Phase::SaslAuthenticate, e))?;
    let answer = exchange(
        conn,
        authenticate_version,
        oauth::client_first_message(&token.value, &settings.extensions),
    )
    .await?;
    if !answer.auth_bytes.is_empty() {
        // A rejected token: acknowledge, and report what the broker said.
        let status = oauth::challenge_status(&answer.auth_bytes);
        let closing = exchange(conn, authenticate_version, oauth::ERROR_ACK.to_vec())
            .await
            .err()
            .map_or_else(String::new, |e| format!("; {e}"));
        return Err(refused(
            Phase::SaslAuthenticate,
            format!(
                "broker rejected the token of {} from {} ({status}){closing}",
                token.principal,
                source.endpoint()
            ),
        ));
    }
    Ok(answer)
}

/// AWS_MSK_IAM: the payload signed for this broker's host with the cluster's credentials.
async fn aws_msk_iam(
    conn: &mut Connection,
    authenticate_version: i16,
    settings: &SaslSettings,
    host: &str,
) -> Result<SaslAuthenticateResponse, WireError> {
    let aws = settings
        .aws
        .as_ref()
        .ok_or_else(|| refused(Phase::SaslAuthenticate, "AWS_MSK_IAM without a region"))?;
    let creds = aws
        .credentials()
        .await
        .map_err(|e| refused(Phase::SaslAuthenticate, e))?;
    let payload = msk_iam::payload(
        host,
        &aws.settings().region,
        &creds,
        msk_iam::USER_AGENT,
        std::time::SystemTime::now(),
    )
    .map_err(|e| refused(Phase::SaslAuthenticate, e))?;
    exchange(conn, authenticate_version, payload).await
}

/// Who authenticated, for the log: the user, the OAuth client or the AWS key id.
fn principal(settings: &SaslSettings) -> String {
    match (&settings.oauth, &settings.aws) {
        (Some(o), _) => o
            .cached()
            .map_or_else(|| "oauth client".into(), |t| t.principal),
        (_, Some(_)) => "aws credentials".into(),
        _ => settings.username.clone(),
    }
}

/// RFC 4616: authorization identity (empty: same as the user), user, password.
fn plain_token(username: &str, password: &str) -> Vec<u8> {
    let mut token = Vec::with_capacity(username.len() + password.len() + 2);
    token.push(0);
    token.extend_from_slice(username.as_bytes());
    token.push(0);
    token.extend_from_slice(password.as_bytes());
    token
}

async fn exchange(
    conn: &mut Connection,
    version: i16,
    token: Vec<u8>,
) -> Result<SaslAuthenticateResponse, WireError> {
    let phase = Phase::SaslAuthenticate;
    let request = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token));
    let response = conn.call(phase, &request, version).await?.value;
    if response.error_code != 0 {
        let message = response
            .error_message
            .as_deref()
            .filter(|m| !m.is_empty())
            .map_or_else(String::new, |m| format!(": {m}"));
        return Err(refused(
            phase,
            format!(
                "Kafka error {} {}{message}",
                response.error_code,
                kafka_error_name(response.error_code)
            ),
        ));
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_token_layout() {
        assert_eq!(plain_token("u", "p"), b"\0u\0p");
    }
}
