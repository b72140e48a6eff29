//! One connection to one broker: the byte stream, correlation ids and per-request deadlines.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::protocol::{HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{lookup_host, TcpStream};
use tokio::time::{timeout, timeout_at, Instant};
use tokio_rustls::client::TlsStream;

use super::error::{Phase, WireError};
use super::frame::{self, FrameError};
use super::guard::{self, Guarded};
use super::Timed;

/// The byte stream under the Kafka protocol; everything above reads and writes through this
/// type only.
pub(crate) enum Stream {
    Plain(TcpStream),
    Tls(Box<TlsStream<TcpStream>>),
}

impl Stream {
    /// The TCP socket under it, for the kernel's counters of it (TCP_INFO).
    fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match self {
            Stream::Plain(s) => s.as_raw_fd(),
            Stream::Tls(s) => s.get_ref().0.as_raw_fd(),
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// Resolves and connects, all within `limit`. Each resolved address is tried in turn, so a
/// host name with an unreachable IPv6 entry still reaches its IPv4 one.
pub(crate) async fn open_tcp(address: &str, limit: Duration) -> Result<TcpStream, WireError> {
    let attempt = async {
        let addrs: Vec<_> = lookup_host(address)
            .await
            .map_err(|e| WireError::Unresolvable {
                address: address.to_owned(),
                detail: e.to_string(),
            })?
            .collect();
        let mut last_error = None;
        for addr in addrs {
            match TcpStream::connect(addr).await {
                Ok(stream) => return Ok(stream),
                Err(e) => last_error = Some(e),
            }
        }
        Err(match last_error {
            None => WireError::Unresolvable {
                address: address.to_owned(),
                detail: "no addresses".to_owned(),
            },
            Some(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                WireError::ConnectionRefused {
                    address: address.to_owned(),
                }
            }
            Some(e) => WireError::Io {
                phase: Phase::Connect,
                source: e,
            },
        })
    };
    let stream = timeout(limit, attempt)
        .await
        .map_err(|_| WireError::Timeout {
            phase: Phase::Connect,
            limit,
        })??;
    // Requests are small and each waits for its answer: Nagle would only add delay.
    stream
        .set_nodelay(true)
        .map_err(|e| WireError::from_io(Phase::Connect, e))?;
    Ok(stream)
}

pub(crate) struct Connection {
    stream: Stream,
    client_id: StrBytes,
    next_correlation_id: i32,
    max_frame_bytes: usize,
    request_timeout: Duration,
    /// Why the connection may no longer carry requests, once it may not.
    abandoned: Option<String>,
}

impl Connection {
    /// The TCP socket it runs on.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        self.stream.raw_fd()
    }

    pub(crate) fn new(
        stream: Stream,
        client_id: &str,
        max_frame_bytes: usize,
        request_timeout: Duration,
    ) -> Self {
        Connection {
            stream,
            client_id: StrBytes::from_string(client_id.to_owned()),
            next_correlation_id: 0,
            max_frame_bytes,
            request_timeout,
            abandoned: None,
        }
    }

    pub(crate) fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    pub(crate) fn is_usable(&self) -> bool {
        self.abandoned.is_none()
    }

    fn abandon(&mut self, cause: String) {
        self.abandoned.get_or_insert(cause);
    }

    /// Sends one request and returns the body of its answer, all before `deadline`; `limit` is
    /// the allowance that deadline stands for, as a timeout error reports it.
    ///
    /// Any failure on the way (timeout, I/O, framing, a foreign correlation id) leaves the
    /// stream in an unknown position, so the connection is abandoned: a late answer must never
    /// be read as the answer to the next request.
    pub(crate) async fn round_trip<R: Request>(
        &mut self,
        phase: Phase,
        request: &R,
        version: i16,
        deadline: Instant,
        limit: Duration,
    ) -> Result<Bytes, WireError> {
        if let Some(cause) = &self.abandoned {
            return Err(WireError::Abandoned {
                phase,
                cause: cause.clone(),
            });
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        // Nothing has been sent when encoding fails, so the connection stays usable.
        let request = frame::encode_request(request, version, correlation_id, &self.client_id)
            .map_err(|d| WireError::protocol(phase, d))?;
        let header_version = R::Response::header_version(version);
        let max_frame = self.max_frame_bytes;
        let stream = &mut self.stream;
        let exchange = async move {
            frame::write_frame(stream, &request)
                .await
                .map_err(|e| WireError::from_io(phase, e))?;
            let response = frame::read_frame(stream, max_frame)
                .await
                .map_err(|e| frame_error(phase, e))?;
            let (answered, body) = frame::split_response(response, header_version)
                .map_err(|d| WireError::protocol(phase, d))?;
            if answered != correlation_id {
                return Err(WireError::protocol(
                    phase,
                    format!("answer has correlation id {answered}, expected {correlation_id}"),
                ));
            }
            Ok(body)
        };
        let outcome = match timeout_at(deadline, exchange).await {
            Ok(outcome) => outcome,
            Err(_) => Err(WireError::Timeout { phase, limit }),
        };
        if let Err(e) = &outcome {
            let cause = match e {
                WireError::Timeout { .. } => format!("timeout in {phase}"),
                other => format!("{} in {phase}", other.kind().as_label()),
            };
            tracing::debug!(%phase, error = %e, "abandoning broker connection");
            self.abandon(cause);
        }
        outcome
    }

    /// One request with its own deadline, its answer decoded, and the time the broker took.
    pub(crate) async fn call<R: Request>(
        &mut self,
        phase: Phase,
        request: &R,
        version: i16,
    ) -> Result<Timed<R::Response>, WireError>
    where
        R::Response: Guarded,
    {
        self.call_within(phase, request, version, self.request_timeout)
            .await
    }

    /// [`call`](Self::call) with a deadline of `limit` instead of the request timeout, for
    /// requests the broker itself may hold for a while (acks=all, elections).
    pub(crate) async fn call_within<R: Request>(
        &mut self,
        phase: Phase,
        request: &R,
        version: i16,
        limit: Duration,
    ) -> Result<Timed<R::Response>, WireError>
    where
        R::Response: Guarded,
    {
        let started = Instant::now();
        let body = self
            .round_trip(phase, request, version, started + limit, limit)
            .await?;
        let latency = started.elapsed();
        let value = guard::decode::<R::Response>(&body, version).map_err(|d| {
            WireError::protocol(phase, format!("undecodable v{version} answer: {d}"))
        })?;
        Ok(Timed { value, latency })
    }
}

fn frame_error(phase: Phase, e: FrameError) -> WireError {
    match e {
        FrameError::Io(e) => WireError::from_io(phase, e),
        other => WireError::protocol(phase, other.to_string()),
    }
}
