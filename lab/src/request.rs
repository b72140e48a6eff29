//! One Kafka request over one blocking connection, for what rdkafka cannot send:
//! DescribeQuorum (`quorum`), AlterUserScramCredentials (`scram`). The version is the
//! caller's to pick (one every release it asks supports); nothing is negotiated.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};

/// Answers are small; a larger length prefix is not an answer to these requests.
const MAX_FRAME: usize = 1 << 20;

/// Sends `request` at `version` to `address` and decodes its answer, within `timeout` for
/// the connection and again for the answer.
pub fn call<R: Request>(
    address: &str,
    request: &R,
    version: i16,
    timeout: Duration,
) -> Result<R::Response, String> {
    let addr = address
        .to_socket_addrs()
        .map_err(|e| e.to_string())?
        .next()
        .ok_or("no address")?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(timeout))
        .and_then(|()| stream.set_write_timeout(Some(timeout)))
        .map_err(|e| e.to_string())?;
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(1)
        .with_client_id(Some(StrBytes::from_static_str("kafka-lab")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, R::header_version(version))
        .and_then(|()| request.encode(&mut body, version))
        .map_err(|e| format!("cannot encode: {e}"))?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(|e| e.to_string())?;
    let mut len = [0u8; 4];
    stream
        .read_exact(&mut len)
        .map_err(|e| format!("no answer: {e}"))?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|n| *n <= MAX_FRAME)
        .ok_or("bad frame length")?;
    let mut answer = vec![0u8; len];
    stream
        .read_exact(&mut answer)
        .map_err(|e| format!("answer cut short: {e}"))?;
    let mut buf = bytes::Bytes::from(answer);
    ResponseHeader::decode(&mut buf, R::Response::header_version(version))
        .map_err(|e| format!("bad header: {e}"))?;
    let response =
        R::Response::decode(&mut buf, version).map_err(|e| format!("undecodable: {e}"))?;
    if buf.has_remaining() {
        return Err("trailing bytes".into());
    }
    Ok(response)
}
