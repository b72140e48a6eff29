//! An in-process broker for tests and benchmarks. It reads request frames, decodes their
//! headers with kafka-protocol and answers with whatever the handler returns, including
//! silence, a closed socket or raw bytes.

use std::sync::{Arc, Mutex};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::api_versions_response::ApiVersion;
use kafka_protocol::messages::{ApiKey, ApiVersionsResponse, ResponseHeader};
use kafka_protocol::protocol::{
    decode_request_header_from_buffer, Decodable, Encodable, HeaderVersion,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::TlsAcceptor;

#[derive(Debug, Clone)]
pub struct Received {
    pub api_key: i16,
    pub version: i16,
    pub correlation_id: i32,
    pub body: Bytes,
}

impl Received {
    pub fn decode<T: Decodable>(&self) -> T {
        T::decode(&mut self.body.clone(), self.version).expect("fake broker decodes request")
    }
}

pub enum Reply {
    /// Bytes written as they are, length prefix included.
    Raw(Vec<u8>),
    /// Bytes written as they are after a pause: a broker holding a request (acks=all
    /// waiting for replicas, an election in progress).
    Delayed(std::time::Duration, Vec<u8>),
    /// Read on, answer nothing: a frozen broker.
    Hang,
    /// Drop the connection without answering.
    Close,
}

pub struct FakeBroker {
    pub address: String,
    /// Every request received, in order, over all connections (none with
    /// [`start_unrecorded`](FakeBroker::start_unrecorded)).
    pub seen: Arc<Mutex<Vec<Received>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeBroker {
    pub async fn start<F>(handler: F) -> Self
    where
        F: Fn(&Received) -> Reply + Send + Sync + 'static,
    {
        Self::start_with(None, true, handler).await
    }

    /// A broker that keeps no log of what it received: for benchmarks, where hundreds of
    /// brokers answer round after round and the log would only grow.
    pub async fn start_unrecorded<F>(handler: F) -> Self
    where
        F: Fn(&Received) -> Reply + Send + Sync + 'static,
    {
        Self::start_with(None, false, handler).await
    }

    /// A broker behind TLS with the given server configuration.
    pub async fn start_tls<F>(config: Arc<ServerConfig>, handler: F) -> Self
    where
        F: Fn(&Received) -> Reply + Send + Sync + 'static,
    {
        Self::start_with(Some(TlsAcceptor::from(config)), true, handler).await
    }

    /// Accepts connections and never reads from them: not even a TLS handshake completes.
    pub async fn silent() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                held.push(socket);
            }
        });
        FakeBroker {
            address,
            seen: Arc::default(),
            task,
        }
    }

    async fn start_with<F>(tls: Option<TlsAcceptor>, record: bool, handler: F) -> Self
    where
        F: Fn(&Received) -> Reply + Send + Sync + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let handler = Arc::new(handler);
        let log = seen.clone();
        let task = tokio::spawn(async move {
            let mut connections = Vec::new();
            while let Ok((socket, _)) = listener.accept().await {
                let handler = handler.clone();
                let log = log.clone();
                let tls = tls.clone();
                // Answers go out at once, as a broker's do, not after Nagle's delay.
                let _ = socket.set_nodelay(true);
                let log = record.then_some(log);
                connections.push(AbortOnDrop(tokio::spawn(async move {
                    match tls {
                        None => serve(socket, handler, log).await,
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(socket).await {
                                serve(stream, handler, log).await;
                            }
                        }
                    }
                })));
            }
        });
        FakeBroker {
            address,
            seen,
            task,
        }
    }

    pub fn seen(&self) -> Vec<Received> {
        self.seen.lock().unwrap().clone()
    }

    pub fn seen_versions(&self, api: ApiKey) -> Vec<i16> {
        self.seen()
            .iter()
            .filter(|r| r.api_key == api as i16)
            .map(|r| r.version)
            .collect()
    }
}

struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn serve<S, F>(mut socket: S, handler: Arc<F>, log: Option<Arc<Mutex<Vec<Received>>>>)
where
    S: AsyncRead + AsyncWrite + Unpin,
    F: Fn(&Received) -> Reply + Send + Sync + 'static,
{
    loop {
        let Ok(length) = socket.read_i32().await else {
            return;
        };
        // Like a real broker, hang up on a frame it will not read (a TLS ClientHello, say).
        let Ok(length) = usize::try_from(length) else {
            return;
        };
        if length > 1 << 20 {
            return;
        }
        let mut frame = vec![0u8; length];
        if socket.read_exact(&mut frame).await.is_err() {
            return;
        }
        let mut frame = Bytes::from(frame);
        let header = decode_request_header_from_buffer(&mut frame).expect("request header");
        let received = Received {
            api_key: header.request_api_key,
            version: header.request_api_version,
            correlation_id: header.correlation_id,
            body: frame,
        };
        if let Some(log) = &log {
            log.lock().unwrap().push(received.clone());
        }
        match handler(&received) {
            Reply::Raw(bytes) => {
                if socket.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Delayed(pause, bytes) => {
                tokio::time::sleep(pause).await;
                if socket.write_all(&bytes).await.is_err() {
                    return;
                }
            }
            Reply::Hang => {
                let mut sink = [0u8; 1024];
                while matches!(socket.read(&mut sink).await, Ok(n) if n > 0) {}
                return;
            }
            Reply::Close => return,
        }
    }
}

/// A complete response frame for `body` encoded at `version`, with the header version the
/// response type calls for.
pub fn frame<T: Encodable + HeaderVersion>(correlation_id: i32, version: i16, body: &T) -> Vec<u8> {
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    ResponseHeader::default()
        .with_correlation_id(correlation_id)
        .encode(&mut buf, T::header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let length = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    buf.to_vec()
}

/// The answer to `request`, encoded at the version it was sent with.
pub fn answer<T: Encodable + HeaderVersion>(request: &Received, body: &T) -> Reply {
    Reply::Raw(frame(request.correlation_id, request.version, body))
}

/// The ranges a Kafka 4.1 broker announces for the APIs this client uses.
pub const KAFKA_4_1: &[(ApiKey, i16, i16)] = &[
    // As the lab's 4.1 brokers announce it, from v0, although Kafka 4.0 removed Produce
    // v0-v2 (KIP-896).
    (ApiKey::Produce, 0, 13),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 13),
    (ApiKey::SaslHandshake, 0, 1),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::SaslAuthenticate, 0, 2),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 1),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::DescribeCluster, 0, 2),
];

/// `KAFKA_4_1` with some ranges replaced (a max below the min removes the API).
pub fn ranges_with(changes: &[(ApiKey, i16, i16)]) -> Vec<(ApiKey, i16, i16)> {
    KAFKA_4_1
        .iter()
        .map(|&(k, min, max)| {
            changes
                .iter()
                .find(|c| c.0 == k)
                .copied()
                .unwrap_or((k, min, max))
        })
        .filter(|&(_, min, max)| min <= max)
        .collect()
}

/// Answers ApiVersions as a broker with these ranges does, including the v0-encoded
/// UNSUPPORTED_VERSION answer to a version above its own.
pub fn answer_api_versions(request: &Received, ranges: &[(ApiKey, i16, i16)]) -> Reply {
    let api_keys = ranges
        .iter()
        .map(|&(k, min, max)| {
            ApiVersion::default()
                .with_api_key(k as i16)
                .with_min_version(min)
                .with_max_version(max)
        })
        .collect();
    let own_max = ranges
        .iter()
        .find(|r| r.0 == ApiKey::ApiVersions)
        .map_or(0, |r| r.2);
    if request.version > own_max {
        let body = ApiVersionsResponse::default()
            .with_error_code(35)
            .with_api_keys(api_keys);
        return Reply::Raw(frame(request.correlation_id, 0, &body));
    }
    answer(
        request,
        &ApiVersionsResponse::default().with_api_keys(api_keys),
    )
}
