//! How the canary's librdkafka clients authenticate when librdkafka cannot do it alone.
//! librdkafka's own OIDC support needs libcurl, which this build leaves out; instead its
//! token refresh callback takes tokens from the same [`TokenSource`] the direct probes use,
//! so one cluster fetches one token per lifetime whatever the number of clients.
//! librdkafka has no AWS_MSK_IAM at all: the canary says so and the probes go on.

use std::error::Error;
use std::ffi::CString;
use std::sync::Arc;
use std::time::UNIX_EPOCH;

use rdkafka::client::{Client, ClientContext, OAuthToken};
use rdkafka::consumer::ConsumerContext;

use crate::observe::wire::{SaslMechanism, Token, TokenSource, WireOptions};

/// The context of every canary client.
#[derive(Clone, Default)]
pub struct CanaryContext {
    token: Option<Arc<TokenSource>>,
}

impl CanaryContext {
    pub fn new(wire: &WireOptions) -> Self {
        CanaryContext {
            token: wire.security.sasl().and_then(|s| s.oauth.clone()),
        }
    }

    /// A token can be had (always true without OAUTHBEARER).
    pub fn token_ready(&self) -> Result<(), String> {
        match &self.token {
            Some(source) => source.token_blocking().map(|_| ()),
            None => Ok(()),
        }
    }

    /// The admin client polls only its own result queue, never the one the refresh event
    /// arrives on: its token is handed over directly, before use.
    pub fn prime<C: ClientContext>(&self, client: &Client<C>) -> Result<(), String> {
        let Some(source) = &self.token else {
            return Ok(());
        };
        let token = source.token_blocking()?;
        set_token(client, &token)
    }
}

/// Why the canary cannot run with this cluster's authentication, if it cannot.
pub fn unsupported(wire: &WireOptions) -> Option<String> {
    let sasl = wire.security.sasl()?;
    (sasl.mechanism == SaslMechanism::AwsMskIam).then(|| {
        "the canary's librdkafka clients cannot authenticate with AWS_MSK_IAM (librdkafka has no \
         such mechanism); every broker is still probed directly. Set canary.enabled: false to \
         run without the canary"
            .to_string()
    })
}

fn oauth_token(token: &Token) -> OAuthToken {
    OAuthToken {
        token: token.value.clone(),
        principal_name: token.principal.clone(),
        lifetime_ms: token
            .expires_at
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64),
    }
}

fn set_token<C: ClientContext>(client: &Client<C>, token: &Token) -> Result<(), String> {
    let t = oauth_token(token);
    let value = CString::new(t.token).map_err(|e| e.to_string())?;
    let principal = CString::new(t.principal_name).map_err(|e| e.to_string())?;
    crate::sys::set_oauthbearer_token(client, &value, t.lifetime_ms, &principal)
}

impl ClientContext for CanaryContext {
    // Only ever asked for with sasl.mechanism OAUTHBEARER.
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(
        &self,
        _oauthbearer_config: Option<&str>,
    ) -> Result<OAuthToken, Box<dyn Error>> {
        let source = self
            .token
            .as_ref()
            .ok_or("OAUTHBEARER without a token endpoint in the configuration")?;
        Ok(oauth_token(&source.token_blocking()?))
    }
}

impl ConsumerContext for CanaryContext {}
