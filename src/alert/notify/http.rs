//! One HTTP exchange with a receiver, shared by the webhook worker and the Slack bot: send,
//! then read the status, `Retry-After` and, when the caller wants it, a bounded body. What
//! the answer means is the callers' (`route::judge`, `slack_bot::api::judge`).

use reqwest::header::RETRY_AFTER;

/// The most of an answer's body that is read. Receivers answer in a few hundred bytes (a
/// Slack Web API answer, an error page); a receiver that sends more, broken or hostile,
/// must not make the watchdog hold or wait for megabytes.
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// A receiver's answer, its body not read yet.
pub struct Answered {
    pub status: u16,
    pub retry_after: Option<String>,
    response: reqwest::Response,
}

/// Sends `request`. The error is said without the URL: it may hold a token (Slack, Teams)
/// and must never reach a log line.
pub async fn send(request: reqwest::RequestBuilder) -> Result<Answered, String> {
    let response = request
        .send()
        .await
        .map_err(|e| e.without_url().to_string())?;
    let retry_after = response
        .headers()
        .get(RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    Ok(Answered {
        status: response.status().as_u16(),
        retry_after,
        response,
    })
}

impl Answered {
    /// The body's first [`MAX_BODY_BYTES`]; the rest is not read.
    pub async fn body(mut self) -> Result<Vec<u8>, String> {
        let mut body = Vec::new();
        while let Some(chunk) = self
            .response
            .chunk()
            .await
            .map_err(|e| e.without_url().to_string())?
        {
            let room = MAX_BODY_BYTES - body.len();
            body.extend_from_slice(&chunk[..chunk.len().min(room)]);
            if body.len() == MAX_BODY_BYTES {
                break;
            }
        }
        Ok(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A receiver answering 400 with a 1 MiB body (and Retry-After) gets read only up to
    /// the bound.
    #[tokio::test]
    async fn a_long_body_is_read_only_to_the_bound() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf).await;
            let body = vec![b'x'; 1024 * 1024];
            let head = format!(
                "HTTP/1.1 400 Bad Request\r\nRetry-After: 7\r\nContent-Length: {}\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(head.as_bytes()).await;
            let _ = s.write_all(&body).await;
        });
        let client = reqwest::Client::new();
        let answered = send(client.post(format!("http://{addr}/hook")).body("{}"))
            .await
            .expect("an answer");
        assert_eq!(answered.status, 400);
        assert_eq!(answered.retry_after.as_deref(), Some("7"));
        assert_eq!(answered.body().await.unwrap().len(), MAX_BODY_BYTES);
    }
}
