//! `security.sasl`: which keys each mechanism takes. PLAIN and SCRAM carry a user and a
//! password; OAUTHBEARER a client of an OIDC token endpoint; AWS_MSK_IAM only where to
//! sign (the credentials come from the AWS SDK's default chain).

use super::checks;
use super::ctx::Ctx;
use super::read::{choice, text, Fields};
use super::schema::{self as s};
use super::secret::{readable_file, secret, Got, Need};
use super::types::*;
use super::yaml::{Entry, Kind};

pub(crate) fn sasl(cx: &mut Ctx, e: &Entry, path: String) -> Option<SaslConfig> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let mechanism = match f.get("mechanism") {
        Some(me) => choice(&mut cx.rep, me, s::MECHANISMS).map(|m| m.value),
        None => {
            let names: Vec<&str> = s::MECHANISMS.iter().map(|(n, _)| *n).collect();
            f.missing(
                &mut cx.rep,
                "mechanism",
                format!("one of: {}", names.join(", ")),
            );
            None
        }
    };
    let user_password = match mechanism {
        Some(SaslMechanism::Plain | SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512) => {
            Need::Required
        }
        Some(SaslMechanism::OAuthBearer) => {
            Need::Forbidden("mechanism OAUTHBEARER authenticates with client_id and client_secret")
        }
        Some(SaslMechanism::AwsMskIam) => {
            Need::Forbidden("mechanism AWS_MSK_IAM takes its credentials from the AWS environment")
        }
        None => Need::Ignore,
    };
    let oauth_need = match mechanism {
        Some(SaslMechanism::OAuthBearer) => Need::Required,
        None => Need::Ignore,
        Some(_) => Need::Forbidden("only mechanism OAUTHBEARER uses it"),
    };
    let username = secret(cx, &mut f, &s::SASL_USERNAME, user_password);
    let password = secret(cx, &mut f, &s::SASL_PASSWORD, user_password);
    let client_id = secret(cx, &mut f, &s::OAUTH_CLIENT_ID, oauth_need);
    let client_secret = secret(cx, &mut f, &s::OAUTH_CLIENT_SECRET, oauth_need);
    let k = MechanismKeys {
        endpoint: f.get("token_endpoint_url"),
        scope: f.get("scope"),
        ca: f.get("token_endpoint_ca_file"),
        region: f.get("region"),
        profile: f.get("profile"),
        extensions: f.get("extensions"),
    };
    f.finish(&mut cx.rep, &|_| None);
    let mechanism = mechanism?;
    let ok = refuse_foreign(cx, mechanism, &k);
    let mut out = SaslConfig {
        mechanism,
        username: String::new(),
        password: Secret::new(""),
        oauthbearer: None,
        aws_msk_iam: None,
    };
    match mechanism {
        SaslMechanism::Plain | SaslMechanism::ScramSha256 | SaslMechanism::ScramSha512 => {
            out.username = username.ok()??.value;
            out.password = password.ok()??.into_secret();
        }
        SaslMechanism::OAuthBearer => {
            // Every problem is reported, a missing client or not.
            let client = (
                client_id.ok().flatten().map(|g| g.value),
                client_secret.ok().flatten().map(Got::into_secret),
            );
            out.oauthbearer = Some(oauthbearer(cx, &f, &k, client)?);
        }
        SaslMechanism::AwsMskIam => out.aws_msk_iam = Some(aws_msk_iam(cx, &f, &k)?),
    }
    ok.then_some(out)
}

/// The keys that belong to one mechanism or another.
struct MechanismKeys<'n> {
    endpoint: Option<&'n Entry>,
    scope: Option<&'n Entry>,
    ca: Option<&'n Entry>,
    region: Option<&'n Entry>,
    profile: Option<&'n Entry>,
    extensions: Option<&'n Entry>,
}

/// Keys of one mechanism under another are refused by name: silently ignoring them would
/// hide a config that was meant for a different mechanism. False when one was.
fn refuse_foreign(cx: &mut Ctx, mechanism: SaslMechanism, k: &MechanismKeys) -> bool {
    let foreign: Vec<&Entry> = match mechanism {
        SaslMechanism::OAuthBearer => vec![k.region, k.profile],
        SaslMechanism::AwsMskIam => vec![k.endpoint, k.scope, k.ca, k.extensions],
        _ => vec![k.endpoint, k.scope, k.ca, k.region, k.profile, k.extensions],
    }
    .into_iter()
    .flatten()
    .collect();
    for e in &foreign {
        cx.rep.add(
            e.key_pos,
            format!("{} is set but mechanism is {}", e.key, mechanism.as_str()),
            Some(format!("no {} with this mechanism", e.key)),
        );
    }
    foreign.is_empty()
}

/// OAUTHBEARER: the token endpoint and how to reach it, the client (`client_id`,
/// `client_secret`, read by the caller as secrets), the extensions.
fn oauthbearer(
    cx: &mut Ctx,
    f: &Fields,
    k: &MechanismKeys,
    (client_id, client_secret): (Option<String>, Option<Secret>),
) -> Option<OAuthBearerConfig> {
    let url = match k.endpoint {
        None => {
            f.missing(
                &mut cx.rep,
                "token_endpoint_url",
                "the https:// URL of the OIDC token endpoint".into(),
            );
            None
        }
        Some(e) => text(&mut cx.rep, e, "an http:// or https:// URL").and_then(|t| {
            match checks::webhook_url(&t.value) {
                Ok(_) => Some(t.value.trim().to_string()),
                Err((m, x)) => {
                    cx.rep.add(t.value_pos, m, Some(x));
                    None
                }
            }
        }),
    };
    let scope = match k.scope {
        None => Some(None),
        Some(e) => text(&mut cx.rep, e, "space-separated scope names").map(|t| Some(t.value)),
    };
    let ca_file = match k.ca {
        None => Some(None),
        Some(e) => readable_file(cx, e).map(Some),
    };
    let extensions = match k.extensions {
        None => Some(Vec::new()),
        Some(e) => oauth_extensions(cx, e),
    };
    Some(OAuthBearerConfig {
        token_endpoint_url: url?,
        client_id: client_id?,
        client_secret: client_secret?,
        scope: scope?,
        ca_file: ca_file?,
        extensions: extensions?,
    })
}

/// AWS_MSK_IAM: the region signed for (from the environment when the file has none) and
/// the profile; the credentials are the AWS SDK's to find.
fn aws_msk_iam(cx: &mut Ctx, f: &Fields, k: &MechanismKeys) -> Option<AwsMskIamConfig> {
    let region = match k.region {
        Some(e) => text(&mut cx.rep, e, "an AWS region such as eu-west-1").map(|t| t.value),
        None => {
            let from_env = ["AWS_REGION", "AWS_DEFAULT_REGION"]
                .iter()
                .find_map(|v| (cx.env)(v).filter(|r| !r.is_empty()));
            if from_env.is_none() {
                f.missing(
                    &mut cx.rep,
                    "region",
                    "the cluster's AWS region (or AWS_REGION in the environment)".into(),
                );
            }
            from_env
        }
    };
    let profile = match k.profile {
        None => Some(None),
        Some(e) => text(
            &mut cx.rep,
            e,
            "a profile of the AWS config and credentials files",
        )
        .map(|t| Some(t.value)),
    };
    Some(AwsMskIamConfig {
        region: region?,
        profile: profile?,
    })
}

/// `extensions:` (RFC 7628 section 3.1, KIP-342): names of letters only, `auth` excepted,
/// to values of visible characters, spaces and tabs; sent with every token, as Confluent
/// Cloud's `logicalCluster` and `identityPoolId` must be.
fn oauth_extensions(cx: &mut Ctx, e: &Entry) -> Option<Vec<(String, String)>> {
    let entries = match &e.value.kind {
        Kind::Map(entries) => entries,
        _ if e.value.is_null() => return Some(Vec::new()),
        _ => {
            cx.rep.add(
                e.value.pos,
                format!("wrong type for extensions: {}", e.value.describe()),
                Some(
                    "a mapping of extension names to values, as logicalCluster: lkc-abc123".into(),
                ),
            );
            return None;
        }
    };
    let mut out = Vec::new();
    let mut ok = true;
    for x in entries {
        if x.key.is_empty() || !x.key.chars().all(|c| c.is_ascii_alphabetic()) || x.key == "auth" {
            cx.rep.add(
                x.key_pos,
                format!("'{}' is not an OAUTHBEARER extension name", x.key),
                Some("letters only, and not 'auth' (RFC 7628)".into()),
            );
            ok = false;
            continue;
        }
        match text(&mut cx.rep, x, "an extension value") {
            Some(v)
                if !v.value.is_empty()
                    && v.value
                        .chars()
                        .all(|c| c == ' ' || c == '\t' || c.is_ascii_graphic()) =>
            {
                out.push((x.key.clone(), v.value));
            }
            Some(v) => {
                cx.rep.add(
                    v.value_pos,
                    format!("extension '{}' has an empty value or one with control or non-ASCII characters", x.key),
                    Some("visible ASCII characters, spaces and tabs (RFC 7628)".into()),
                );
                ok = false;
            }
            None => ok = false,
        }
    }
    ok.then_some(out)
}
