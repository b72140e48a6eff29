//! A webhook receiver for the lab: accepts HTTP POSTs of JSON, answers 200, keeps every
//! body, and (for `kafka-lab sink`) prints each notification as a readable block and
//! appends it to a JSON-lines file. Tests start it in-process and read what it received.
//!
//! HTTP/1.1 is parsed by hand (request line, headers, `Content-Length` or chunked body,
//! keep-alive): enough for webhook clients, and no HTTP server dependency in the lab.

use std::fs::OpenOptions;
use std::io::Write;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::LabError;

/// Where `kafka-lab sink` listens unless told otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9645";
/// Bodies above this are refused (413): no webhook is that large.
const MAX_BODY: usize = 1 << 20;
const MAX_HEADER_LINES: usize = 100;

#[derive(Debug, Clone, Default)]
pub struct SinkOptions {
    /// Print each notification to stdout.
    pub print: bool,
    /// Append each body as one JSON line to this file.
    pub jsonl: Option<PathBuf>,
}

/// A running receiver; it stops when dropped.
pub struct Sink {
    addr: SocketAddr,
    received: Arc<Mutex<Vec<Value>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Sink {
    /// Listens on `addr` (port 0 picks a free port), keeping what it receives.
    pub async fn start(addr: SocketAddr) -> Result<Sink, LabError> {
        Sink::start_with(addr, SinkOptions::default()).await
    }

    pub async fn start_with(addr: SocketAddr, options: SinkOptions) -> Result<Sink, LabError> {
        let listener = TcpListener::bind(addr)
            .await
            .map_err(|e| LabError::Invalid(format!("cannot listen on {addr}: {e}")))?;
        let addr = listener
            .local_addr()
            .map_err(|e| LabError::Invalid(format!("cannot listen on {addr}: {e}")))?;
        let received: Arc<Mutex<Vec<Value>>> = Arc::default();
        let keep = received.clone();
        let options = Arc::new(options);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                };
                tokio::spawn(serve(stream, keep.clone(), options.clone()));
            }
        });
        Ok(Sink {
            addr,
            received,
            task,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The URL to configure as a webhook.
    pub fn url(&self) -> String {
        format!("http://{}/", self.addr)
    }

    /// Every body received so far, in arrival order (a body that is not JSON is kept as
    /// a string).
    pub fn received(&self) -> Vec<Value> {
        self.received
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until at least `n` bodies arrived or `timeout` passed; returns what arrived.
    pub async fn wait_for(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let end = tokio::time::Instant::now() + timeout;
        loop {
            let got = self.received();
            if got.len() >= n || tokio::time::Instant::now() >= end {
                return got;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Request {
    method: String,
    body: Vec<u8>,
    close: bool,
}

async fn serve(stream: TcpStream, keep: Arc<Mutex<Vec<Value>>>, options: Arc<SinkOptions>) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    loop {
        let request = match read_request(&mut reader).await {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(status) => {
                let _ = write.write_all(response(status).as_bytes()).await;
                return;
            }
        };
        if request.method != "POST" {
            let _ = write.write_all(response(405).as_bytes()).await;
            if request.close {
                return;
            }
            continue;
        }
        let value = serde_json::from_slice(&request.body)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&request.body).into_owned()));
        record(&keep, &options, value);
        if write.write_all(response(200).as_bytes()).await.is_err() || request.close {
            return;
        }
    }
}

fn response(status: u16) -> String {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        405 => "Method Not Allowed",
        413 => "Payload Too Large",
        _ => "Error",
    };
    format!("HTTP/1.1 {status} {reason}\r\nContent-Length: 0\r\n\r\n")
}

/// One request, `None` at a clean end of the connection, or the status to refuse it with.
async fn read_request<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Result<Option<Request>, u16> {
    let mut line = String::new();
    if r.read_line(&mut line).await.map_err(|_| 400u16)? == 0 {
        return Ok(None);
    }
    let method = line.split_whitespace().next().unwrap_or("").to_string();
    let mut length = 0usize;
    let mut chunked = false;
    let mut close = false;
    for _ in 0..MAX_HEADER_LINES {
        line.clear();
        if r.read_line(&mut line).await.map_err(|_| 400u16)? == 0 {
            return Err(400);
        }
        let l = line.trim_end();
        if l.is_empty() {
            let body = if chunked {
                read_chunked(r).await?
            } else {
                if length > MAX_BODY {
                    return Err(413);
                }
                let mut body = vec![0; length];
                r.read_exact(&mut body).await.map_err(|_| 400u16)?;
                body
            };
            return Ok(Some(Request {
                method,
                body,
                close,
            }));
        }
        let Some((name, value)) = l.split_once(':') else {
            return Err(400);
        };
        let value = value.trim();
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.parse().map_err(|_| 400u16)?,
            "transfer-encoding" => chunked = value.eq_ignore_ascii_case("chunked"),
            "connection" => close = value.eq_ignore_ascii_case("close"),
            _ => {}
        }
    }
    Err(400)
}

async fn read_chunked<R: AsyncBufReadExt + Unpin>(r: &mut R) -> Result<Vec<u8>, u16> {
    let mut body = Vec::new();
    let mut line = String::new();
    loop {
        line.clear();
        r.read_line(&mut line).await.map_err(|_| 400u16)?;
        let size_text = line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_text, 16).map_err(|_| 400u16)?;
        if body.len() + size > MAX_BODY {
            return Err(413);
        }
        if size == 0 {
            // Trailers, up to the blank line.
            loop {
                line.clear();
                if r.read_line(&mut line).await.map_err(|_| 400u16)? == 0 || line.trim().is_empty()
                {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..]).await.map_err(|_| 400u16)?;
        line.clear();
        r.read_line(&mut line).await.map_err(|_| 400u16)?;
    }
}

fn record(keep: &Mutex<Vec<Value>>, options: &SinkOptions, value: Value) {
    if options.print {
        println!("{}", render(&value, SystemTime::now()));
    }
    if let Some(path) = &options.jsonl {
        let line = format!("{value}\n");
        let written = OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| f.write_all(line.as_bytes()));
        if let Err(e) = written {
            eprintln!("kafka-lab sink: cannot append to {}: {e}", path.display());
        }
    }
    keep.lock().unwrap_or_else(|p| p.into_inner()).push(value);
}

/// `2025-11-29T19:05:00Z`.
fn utc(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    // Days to a civil date in 400-year eras (the Gregorian calendar repeats per era).
    let z = (secs / 86_400) as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let rem = secs % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}

/// One readable block per notification. The generic format is shown field by field;
/// other formats (Slack, PagerDuty, Alertmanager, Teams) by their headline and raw JSON.
pub fn render(v: &Value, received_at: SystemTime) -> String {
    let when = utc(received_at);
    if v.get("schema_version").is_none() || v.get("event").is_none() {
        let kind = if v.is_array() {
            "alertmanager"
        } else if v.get("routing_key").is_some() {
            "pagerduty"
        } else if v.get("attachments").is_some() && v.get("type").is_some() {
            "teams"
        } else if v.get("text").is_some() {
            "slack"
        } else {
            "unknown"
        };
        return format!("== {when}  {kind} body\n{v}\n");
    }
    let field = |k: &str| text(&v[k]);
    let mut out = format!(
        "== {when}  {}  {}  cluster {}\n",
        field("event").to_uppercase(),
        field("severity"),
        field("cluster")
    );
    let broker = match (&v["broker_id"], &v["broker_address"]) {
        (Value::Null, _) => "-".to_string(),
        (id, Value::Null) => id.to_string(),
        (id, addr) => format!("{id} ({})", text(addr)),
    };
    out.push_str(&format!(
        "   kind {}  broker {broker}  state {}\n",
        field("kind"),
        field("state")
    ));
    out.push_str(&format!("   {}\n", field("summary")));
    for e in v["evidence"].as_array().into_iter().flatten() {
        out.push_str(&format!("     - {}\n", text(e)));
    }
    let changes: Vec<String> = v["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(text)
        .collect();
    if !changes.is_empty() {
        out.push_str(&format!("   changed: {}\n", changes.join("; ")));
    }
    out.push_str(&format!(
        "   incident {}  started {}  duration {} s  seq {}",
        field("incident_id"),
        field("started_at"),
        field("duration_seconds"),
        field("sequence")
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use tokio::io::AsyncWriteExt;

    async fn post(addr: SocketAddr, raw: &str) -> String {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(raw.as_bytes()).await.unwrap();
        let mut buf = vec![0; 256];
        let n = s.read(&mut buf).await.unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[tokio::test]
    async fn keeps_what_is_posted_and_answers_200() {
        let dir = std::env::temp_dir().join(format!("kafka-lab-sink-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let jsonl = dir.join("got.jsonl");
        let _ = std::fs::remove_file(&jsonl);
        let sink = Sink::start_with(
            "127.0.0.1:0".parse().unwrap(),
            SinkOptions {
                print: false,
                jsonl: Some(jsonl.clone()),
            },
        )
        .await
        .unwrap();
        let body = r#"{"schema_version":1,"event":"opened","cluster":"lab"}"#;
        let answer = post(
            sink.addr(),
            &format!("POST /hook HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len()),
        )
        .await;
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        let chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n[1,2,\r\n2\r\n3]\r\n0\r\n\r\n";
        assert!(post(sink.addr(), chunked).await.starts_with("HTTP/1.1 200"));
        let got = sink.wait_for(2, Duration::from_secs(5)).await;
        assert_eq!(
            got,
            vec![
                json!({"schema_version":1,"event":"opened","cluster":"lab"}),
                json!([1, 2, 3])
            ]
        );
        let lines = std::fs::read_to_string(&jsonl).unwrap();
        assert_eq!(lines.lines().count(), 2);
        assert!(
            post(sink.addr(), "GET / HTTP/1.1\r\nConnection: close\r\n\r\n")
                .await
                .starts_with("HTTP/1.1 405")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn serves_several_requests_on_one_connection() {
        let sink = Sink::start("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let one = "POST / HTTP/1.1\r\nContent-Length: 2\r\n\r\n{}";
        let mut s = TcpStream::connect(sink.addr()).await.unwrap();
        s.write_all(format!("{one}{one}").as_bytes()).await.unwrap();
        let got = sink.wait_for(2, Duration::from_secs(5)).await;
        assert_eq!(got.len(), 2);
        assert!(sink.url().starts_with("http://127.0.0.1:"));
    }

    #[test]
    fn renders_a_generic_notification_as_a_block() {
        let v = json!({
            "schema_version": 1, "event": "opened", "severity": "critical", "cluster": "lab",
            "kind": "broker", "broker_id": 2, "broker_address": "127.0.0.12:9092",
            "state": "zombie", "summary": "broker 2 (127.0.0.12:9092) is a zombie",
            "evidence": ["no_answer: timeout after 2.0 s"], "changes": [],
            "incident_id": "kw-1", "started_at": "2023-11-14T22:13:20.000Z",
            "duration_seconds": 20.0, "sequence": 5
        });
        let out = render(&v, UNIX_EPOCH + Duration::from_secs(1_700_000_000));
        assert_eq!(
            out,
            "== 2023-11-14T22:13:20Z  OPENED  critical  cluster lab\n   kind broker  broker 2 (127.0.0.12:9092)  state zombie\n   broker 2 (127.0.0.12:9092) is a zombie\n     - no_answer: timeout after 2.0 s\n   incident kw-1  started 2023-11-14T22:13:20.000Z  duration 20.0 s  seq 5"
        );
        let pd = render(
            &json!({"routing_key": "k", "event_action": "resolve"}),
            UNIX_EPOCH,
        );
        assert!(
            pd.starts_with("== 1970-01-01T00:00:00Z  pagerduty body\n"),
            "{pd}"
        );
    }

    #[test]
    fn dates_are_right_across_leap_years() {
        assert_eq!(
            utc(UNIX_EPOCH + Duration::from_secs(951_782_400)),
            "2000-02-29T00:00:00Z"
        );
        assert_eq!(
            utc(UNIX_EPOCH + Duration::from_secs(4_102_444_799)),
            "2099-12-31T23:59:59Z"
        );
    }
}
