//! A small HTTP/1.1 server whose answers the bench scripts, recording every request with
//! when it arrived: the dead man's switch receiver and the forging peers. One thread per
//! connection; every answer closes its connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Request {
    pub at: Instant,
    pub path: String,
    /// Header names in lower case.
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// An answer: status, extra header lines (name, value), body.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Answer {
    pub fn ok(body: impl Into<String>) -> Answer {
        Answer {
            status: 200,
            headers: Vec::new(),
            body: body.into(),
        }
    }
}

type Handler = dyn Fn(&Request) -> Answer + Send + Sync;

pub struct Stub {
    pub port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Stub {
    pub fn start(
        handler: impl Fn(&Request) -> Answer + Send + Sync + 'static,
    ) -> std::io::Result<Stub> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let port = listener.local_addr()?.port();
        let requests: Arc<Mutex<Vec<Request>>> = Arc::default();
        let (seen, handler): (_, Arc<Handler>) = (requests.clone(), Arc::new(handler));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let (seen, handler) = (seen.clone(), handler.clone());
                std::thread::spawn(move || serve(stream, &seen, &*handler));
            }
        });
        Ok(Stub { port, requests })
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

fn serve(mut stream: std::net::TcpStream, seen: &Mutex<Vec<Request>>, handler: &Handler) {
    let Ok(read) = stream.try_clone() else { return };
    let mut reader = BufReader::new(read);
    let mut first = String::new();
    if reader.read_line(&mut first).unwrap_or(0) == 0 {
        return;
    }
    let at = Instant::now();
    let path = first
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_string();
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        if let Some((n, v)) = line.split_once(':') {
            headers.push((n.trim().to_ascii_lowercase(), v.trim().to_string()));
        }
    }
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; length.min(1 << 20)];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request = Request {
        at,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let answer = handler(&request);
    if let Ok(mut s) = seen.lock() {
        s.push(request);
    }
    let extra: String = answer
        .headers
        .iter()
        .map(|(n, v)| format!("{n}: {v}\r\n"))
        .collect();
    let _ = write!(
        stream,
        "HTTP/1.1 {} X\r\nContent-Type: application/json\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{}",
        answer.status,
        answer.body.len(),
        answer.body
    );
}
