//! A cluster's `security:` block: the protocol, and the `sasl:` and `tls:` blocks it calls
//! for (SASL itself is read in `sasl.rs`). Read by `cluster.rs` for each cluster.

use super::checks;
use super::ctx::Ctx;
use super::read::{choice, text, Fields, Origin, Resolved, Set, Slot};
use super::sasl::sasl;
use super::schema as s;
use super::secret::readable_file;
use super::types::*;
use super::yaml::Entry;

pub(super) fn security(cx: &mut Ctx, e: &Entry, path: String) -> Option<Security> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let protocol = Slot::read(f.get("protocol"), |e| choice(&mut cx.rep, e, s::PROTOCOLS));
    let sasl_entry = f.get("sasl");
    let tls_entry = f.get("tls");
    f.finish(&mut cx.rep, &|_| None);

    let protocol = match protocol {
        Slot::Set(p) => p,
        Slot::Unset => Set {
            value: s::PROTOCOL_DEFAULT,
            key_pos: f.pos,
            value_pos: f.pos,
        },
        Slot::Bad => {
            // Still worth reading the blocks: their own problems are real either way.
            if let Some(se) = sasl_entry {
                sasl(cx, se, f.child("sasl"));
            }
            if let Some(te) = tls_entry {
                tls(cx, te, f.child("tls"));
            }
            return None;
        }
    };
    let p = protocol.value;
    let mut ok = true;
    let sasl = match (sasl_entry, p.uses_sasl()) {
        (Some(se), true) => {
            let r = sasl(cx, se, f.child("sasl"));
            ok &= r.is_some();
            r
        }
        (Some(se), false) => {
            cx.rep.add(
                se.key_pos,
                format!("sasl is set but protocol is {}", p.as_str()),
                Some("protocol SASL_PLAINTEXT or SASL_SSL, or no sasl block".into()),
            );
            ok = false;
            None
        }
        (None, true) => {
            cx.rep.add(
                protocol.value_pos,
                format!("protocol {} needs a sasl block in {}", p.as_str(), f.path),
                Some("sasl: with mechanism, username and password_env or password_file".into()),
            );
            ok = false;
            None
        }
        (None, false) => None,
    };
    let tls = match (tls_entry, p.uses_tls()) {
        (Some(te), true) => {
            let r = tls(cx, te, f.child("tls"));
            ok &= r.is_some();
            r
        }
        (Some(te), false) => {
            cx.rep.add(
                te.key_pos,
                format!("tls is set but protocol is {}", p.as_str()),
                Some("protocol SSL or SASL_SSL, or no tls block".into()),
            );
            ok = false;
            None
        }
        (None, true) => Some(TlsConfig::default()),
        (None, false) => None,
    };
    ok.then_some(Security {
        protocol: p,
        sasl,
        tls,
    })
}

fn tls(cx: &mut Ctx, e: &Entry, path: String) -> Option<TlsConfig> {
    let mut f = Fields::open(&mut cx.rep, &e.value, Some(e), path)?;
    let ca_entry = f.get("ca_file");
    let cert_entry = f.get("cert_file");
    let key_entry = f.get("key_file");
    let name_entry = f.get("server_name");
    let verify = s::TlsVerifyLayer::read(&mut cx.rep, &mut f).alone();
    if let Some(Resolved {
        value: true,
        from: Origin::Cluster(pos),
    }) = verify.insecure_skip_verify
    {
        cx.rep.warn(
            pos,
            format!("{}.insecure_skip_verify is true: the brokers' certificates are not checked, so anyone on the path can read and answer the watchdog's requests", f.path),
            Some("ca_file with the CA that signed the brokers' certificates, and insecure_skip_verify left false".into()),
        );
    }
    f.finish(&mut cx.rep, &|_| None);

    let mut ok = true;
    let mut optional_file = |cx: &mut Ctx, e: Option<&Entry>| match e {
        None => None,
        Some(e) => {
            let p = readable_file(cx, e);
            ok &= p.is_some();
            p
        }
    };
    let ca_file = optional_file(cx, ca_entry);
    let client_cert = match (cert_entry, key_entry) {
        (Some(c), Some(k)) => {
            let cert = optional_file(cx, Some(c));
            let key = optional_file(cx, Some(k));
            cert.zip(key).map(|(cert_file, key_file)| ClientCert {
                cert_file,
                key_file,
            })
        }
        (Some(one), None) | (None, Some(one)) => {
            let other = if one.key == "cert_file" {
                "key_file"
            } else {
                "cert_file"
            };
            cx.rep.add(
                one.key_pos,
                format!("{} is set but {other} is not", one.key),
                Some("both cert_file and key_file, or neither".into()),
            );
            ok = false;
            None
        }
        (None, None) => None,
    };
    let server_name = name_entry.and_then(|e| {
        let t = text(&mut cx.rep, e, "a DNS name or an IP address");
        let checked = t.and_then(|t| match checks::server_name(&t.value) {
            Ok(()) => Some(t.value),
            Err((m, x)) => {
                cx.rep.add(t.value_pos, m, Some(x));
                None
            }
        });
        ok &= checked.is_some();
        checked
    });
    let insecure_skip_verify = verify.values()?.insecure_skip_verify;
    ok.then_some(TlsConfig {
        ca_file,
        client_cert,
        server_name,
        insecure_skip_verify,
    })
}
