//! What an HTTP client sends the server: raw bytes on one connection, served by the same
//! connection handler as a client on the listening socket (hyper's parser, then the
//! watchdog's own part: routing, the credential, the local token, the `Host` and
//! `Content-Type` checks of the silences API, the peer key's proof, the probes' lane),
//! without a socket, on a paused clock.

use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Input;
use crate::alert::peers::auth::LiveKey;
use crate::config::{HttpAuth, Secret};
use crate::serve::http::{serve_stream, ServeOptions};
use crate::serve::snapshot::Publisher;

/// How long, on the paused clock, a connection is served at most. The clock moves only
/// while every task waits for a timer (a blocking call, such as the page's read of
/// `/proc`, holds it), so this ends the exchange at once once the server waits for
/// nothing but the client, which sends nothing more.
const TALK_LIMIT: Duration = Duration::from_secs(60);

/// The peer key of the modes with one (a seed holds an ask signed with it).
pub(super) const PEER_KEY: &str = "fuzz-peer-key-of-at-least-32-characters";

/// `[mode]`, then the bytes a client sends. The mode sets the server up as a daemon may
/// be: its two low bits, without `http.auth`, asked from loopback with a local token or
/// from elsewhere without one; with HTTP Basic; with a bearer token. Bit 2 adds a peer
/// key (`/api/v1/peer` then asks for its proof), bit 3 serves the connection in the
/// probes' lane, as one past a cap.
pub fn http_request(data: &[u8]) {
    let _ = exchange(data);
}

/// What the server answers to the request in `data`.
fn exchange(data: &[u8]) -> Vec<u8> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("a runtime")
    });
    let mut input = Input::new(data);
    let mode = input.byte();
    let loopback: SocketAddr = ([127, 0, 0, 1], 40_000).into();
    let remote: SocketAddr = ([192, 0, 2, 7], 40_000).into();
    let (auth, local_token, peer) = match mode % 4 {
        0 => (None, Some(Secret::new("local-token")), loopback),
        1 => (None, None, remote),
        2 => (
            Some(HttpAuth::Basic {
                username: "ops".into(),
                password: Secret::new("pass:word"),
            }),
            None,
            remote,
        ),
        _ => (
            Some(HttpAuth::Bearer {
                token: Secret::new("bearer-token"),
            }),
            None,
            loopback,
        ),
    };
    let options = ServeOptions {
        auth,
        local_token,
        peer_key: (mode & 4 != 0).then(|| Arc::new(LiveKey::from(PEER_KEY))),
        ..ServeOptions::default()
    };
    let probes_only = mode & 8 != 0;
    let request = input.rest().to_vec();
    runtime.block_on(async move {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let published = Publisher::new("fuzz", vec!["fuzz".into()]);
        let serve = serve_stream(server, published, &options, peer, probes_only);
        let (mut from_server, mut to_server) = tokio::io::split(client);
        // The client's side stays open: hyper drops what it has not answered yet when the
        // client closes. The server ends the connection (a request it refuses, its header
        // timeout, the lane's one answer), or the limit does.
        let mut answer = Vec::new();
        let talk = async {
            let _ = to_server.write_all(&request).await;
            let _ = from_server.read_to_end(&mut answer).await;
        };
        let _ = tokio::time::timeout(TALK_LIMIT, async { tokio::join!(serve, talk) }).await;
        answer
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status_lines(mode: u8, request: &str) -> Vec<String> {
        let mut data = vec![mode];
        data.extend(request.replace('\n', "\r\n").as_bytes());
        String::from_utf8_lossy(&exchange(&data))
            .lines()
            .filter(|l| l.starts_with("HTTP/1.1 "))
            .map(|l| l["HTTP/1.1 ".len()..].to_string())
            .collect()
    }

    /// The harness reaches the watchdog's own answers, not only hyper's: routing, the
    /// credential per mode, the silences API's checks, keep-alive.
    #[test]
    fn requests_reach_the_watchdogs_own_answers() {
        let get =
            |path: &str, auth: &str| format!("GET {path} HTTP/1.1\nHost: localhost\n{auth}\n");
        assert_eq!(status_lines(0, &get("/healthz", "")), ["200 OK"]);
        assert_eq!(status_lines(0, &get("/nope", "")), ["404 Not Found"]);
        assert_eq!(status_lines(2, &get("/status", "")), ["401 Unauthorized"]);
        assert_eq!(
            status_lines(
                2,
                &get("/status", "Authorization: basic b3BzOnBhc3M6d29yZA==\n")
            ),
            ["200 OK"]
        );
        assert_eq!(
            status_lines(3, &get("/metrics", "Authorization: Bearer wrong\n")),
            ["401 Unauthorized"]
        );
        let post = |token: &str| {
            format!("POST /api/v1/silences HTTP/1.1\nHost: localhost\nAuthorization: Bearer {token}\nContent-Type: application/json\nContent-Length: 2\n\n{{}}")
        };
        // The local token passes the checks; alerting has not started in the harness.
        assert_eq!(
            status_lines(0, &post("local-token")),
            ["503 Service Unavailable"]
        );
        assert_eq!(status_lines(0, &post("other")), ["401 Unauthorized"]);
        assert_eq!(status_lines(1, &post("local-token")), ["403 Forbidden"]);
        assert_eq!(
            status_lines(1, &format!("{}{}", get("/healthz", ""), get("/readyz", ""))),
            ["200 OK", "503 Service Unavailable"]
        );
        // With a peer key, the peer path asks for its proof, even past http.auth.
        assert_eq!(
            status_lines(4 | 1, &get("/api/v1/peer", "")),
            ["401 Unauthorized"]
        );
        assert_eq!(
            status_lines(
                4 | 3,
                &get("/api/v1/peer", "Authorization: Bearer bearer-token\n")
            ),
            ["401 Unauthorized"]
        );
        // In the probes' lane: a probe is answered, a page is not, one answer a connection.
        assert_eq!(status_lines(8 | 1, &get("/healthz", "")), ["200 OK"]);
        assert_eq!(
            status_lines(
                8 | 2,
                &format!("{}{}", get("/status", ""), get("/healthz", ""))
            ),
            ["503 Service Unavailable"]
        );
    }
}
