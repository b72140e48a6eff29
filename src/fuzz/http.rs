//! What an HTTP client sends the server: raw bytes on one connection, served by the same
//! connection handler as a client on the listening socket (hyper's parser, then the
//! watchdog's own part: routing, the credential, the local token, the `Host` and
//! `Content-Type` checks of the silences API), without a socket.

use std::net::SocketAddr;
use std::sync::OnceLock;

use std::task::Poll;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::Input;
use crate::config::{HttpAuth, Secret};
use crate::serve::http::serve_stream;
use crate::serve::snapshot::Publisher;

/// Polls of the server in a row without an answer byte after which it has answered all
/// it can: every poll runs it until it waits for the client, and nothing here waits on
/// anything but the client.
const QUIET_POLLS: u32 = 16;

/// `[mode]`, then the bytes a client sends. The mode sets the server up as a daemon may
/// be: without `http.auth`, asked from loopback with a local token or from elsewhere
/// without one; with HTTP Basic; with a bearer token.
pub fn http_request(data: &[u8]) {
    let _ = exchange(data);
}

/// What the server answers to the request in `data`.
fn exchange(data: &[u8]) -> Vec<u8> {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime")
    });
    let mut input = Input::new(data);
    let loopback: SocketAddr = ([127, 0, 0, 1], 40_000).into();
    let remote: SocketAddr = ([192, 0, 2, 7], 40_000).into();
    let (auth, local_token, peer) = match input.byte() % 4 {
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
    let request = input.rest().to_vec();
    runtime.block_on(async move {
        let (client, server) = tokio::io::duplex(64 * 1024);
        let published = Publisher::new("fuzz", vec!["fuzz".into()]);
        let serve = serve_stream(server, published, auth, local_token, peer);
        let (mut from_server, mut to_server) = tokio::io::split(client);
        let talk = async move {
            let _ = to_server.write_all(&request).await;
            // Served with hyper's defaults, the server drops what it has not answered yet
            // when the client closes its side: the stream is closed only once the server
            // has gone quiet, polls that give it nothing more to read or write.
            let mut answer = Vec::new();
            let mut quiet = 0;
            let mut buf = [0u8; 8192];
            while quiet < QUIET_POLLS {
                let read = from_server.read(&mut buf);
                tokio::pin!(read);
                match futures::poll!(read) {
                    Poll::Ready(Ok(0)) | Poll::Ready(Err(_)) => return answer,
                    Poll::Ready(Ok(n)) => {
                        answer.extend_from_slice(&buf[..n]);
                        quiet = 0;
                    }
                    Poll::Pending => {
                        quiet += 1;
                        tokio::task::yield_now().await;
                    }
                }
            }
            let _ = to_server.shutdown().await;
            let _ = from_server.read_to_end(&mut answer).await;
            answer
        };
        let ((), answer) = tokio::join!(serve, talk);
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
    }
}
