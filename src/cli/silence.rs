//! `kafka-watchdog silence add|list|expire`: the silences API of a running daemon, from a
//! shell. It finds the daemon and its credential as `status` does.

use serde_json::Value;

use super::client::{with_auth, StatusError, Target};

fn url(target: &Target, tail: &str) -> String {
    format!(
        "{}{}{tail}",
        target.base_url.trim_end_matches('/'),
        crate::serve::http::SILENCES_PATH
    )
}

/// Sends one request; the daemon's JSON answer, or its error sentence.
async fn call(
    req: reqwest::RequestBuilder,
    target: &Target,
    url: &str,
) -> Result<Value, StatusError> {
    let unreachable = |e: reqwest::Error| super::client::unreachable(url, &e);
    let answer = with_auth(req, target).send().await.map_err(unreachable)?;
    let code = answer.status().as_u16();
    let body = answer.text().await.map_err(unreachable)?;
    let doc: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
    match code {
        200 | 201 => Ok(doc),
        401 if target.auth.is_some() || doc["error"].as_str().is_none() => {
            Err(StatusError::Unauthorized {
                url: url.to_string(),
            })
        }
        _ => {
            let mut said = doc["error"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| body.trim().chars().take(200).collect());
            // Without http.auth, a refused change most likely lacked the local token.
            if let (401, Some(Err(why))) = (code, &target.local_token) {
                said.push_str("; ");
                said.push_str(why);
            }
            Err(StatusError::Http {
                url: url.to_string(),
                code,
                body: said,
            })
        }
    }
}

pub async fn add(
    client: &reqwest::Client,
    target: &Target,
    request: &crate::model::silence::Request,
) -> Result<Value, StatusError> {
    let u = url(target, "");
    call(client.post(&u).json(request), target, &u).await
}

pub async fn list(client: &reqwest::Client, target: &Target) -> Result<Value, StatusError> {
    let u = url(target, "");
    call(client.get(&u), target, &u).await
}

pub async fn expire(
    client: &reqwest::Client,
    target: &Target,
    id: &str,
) -> Result<Value, StatusError> {
    let u = url(target, &format!("/{id}"));
    call(client.delete(&u), target, &u).await
}

/// One line per silence: id, in force or not, what, until when, who, why.
pub fn render(silences: &[Value]) -> String {
    if silences.is_empty() {
        return "no silences\n".into();
    }
    let mut out = String::new();
    for s in silences {
        let mut what = Vec::new();
        what.push(format!("cluster {}", s["cluster"].as_str().unwrap_or("*")));
        if let Some(b) = s["broker"].as_i64() {
            what.push(format!("broker {b}"));
        }
        if let Some(k) = s["kind"].as_str() {
            what.push(format!("kind {k}"));
        }
        out.push_str(&format!(
            "{}  {:<7} {}  {} .. {}  by {} ({}): {}\n",
            s["id"].as_str().unwrap_or("?"),
            if s["active"].as_bool() == Some(true) {
                "active"
            } else {
                "pending/ended"
            },
            what.join(", "),
            s["starts_at"].as_str().unwrap_or("?"),
            s["ends_at"].as_str().unwrap_or("?"),
            s["created_by"].as_str().unwrap_or("?"),
            s["origin"].as_str().unwrap_or("?"),
            s["comment"].as_str().unwrap_or(""),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_lines_say_what_until_when_and_why() {
        let page = render(&[serde_json::json!({
            "id": "s-0123456789ab", "cluster": "orders", "broker": 2, "kind": null,
            "starts_at": "2026-12-01T13:00:00.000Z", "ends_at": "2026-12-01T15:00:00.000Z",
            "active": true, "comment": "rolling upgrade to 4.1", "created_by": "alice",
            "origin": "api"
        })]);
        assert_eq!(
            page,
            "s-0123456789ab  active  cluster orders, broker 2  2026-12-01T13:00:00.000Z .. 2026-12-01T15:00:00.000Z  by alice (api): rolling upgrade to 4.1\n"
        );
        assert_eq!(render(&[]), "no silences\n");
    }
}
