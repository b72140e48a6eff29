//! What a broker says of its log directories (DescribeLogDirs, raw, every topic), to see
//! what `kafka-lab fill N` does to them from a client's side:
//!
//!   log_dirs N [SECONDS]   broker N's answer once; with SECONDS, asked every 100 ms for that
//!                          long, printing each answer that differs from the one before with
//!                          the time since the start (run `kafka-lab fill N` meanwhile)
//!
//! Each directory: its error code (56 KAFKA_STORAGE_ERROR once offline), total and usable
//! bytes (v4+, Kafka 3.3+; -1 when the broker does not know) and its partition count.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use bytes::{Buf, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, ApiVersionsResponse, DescribeLogDirsRequest, DescribeLogDirsResponse,
    RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Message, Request, StrBytes};

fn call<Req: Request + Encodable + HeaderVersion, Resp: Decodable + HeaderVersion>(
    stream: &mut TcpStream,
    request: &Req,
    version: i16,
    correlation: i32,
) -> Result<Resp, String> {
    let header = RequestHeader::default()
        .with_request_api_key(Req::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("kafka-lab-log-dirs")));
    let mut body = BytesMut::new();
    header
        .encode(&mut body, Req::header_version(version))
        .and_then(|()| request.encode(&mut body, version))
        .map_err(|e| format!("encode: {e}"))?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame).map_err(|e| e.to_string())?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len).map_err(|e| e.to_string())?;
    let mut answer = vec![0u8; i32::from_be_bytes(len).max(0) as usize];
    stream.read_exact(&mut answer).map_err(|e| e.to_string())?;
    let mut buf = bytes::Bytes::from(answer);
    ResponseHeader::decode(&mut buf, Resp::header_version(version))
        .map_err(|e| format!("header: {e}"))?;
    let out = Resp::decode(&mut buf, version).map_err(|e| format!("decode: {e}"))?;
    if buf.has_remaining() {
        return Err("trailing bytes".into());
    }
    Ok(out)
}

/// One line per directory, sorted.
fn describe(address: &str) -> Result<(i16, Vec<String>), String> {
    let addr = address.parse().map_err(|e| format!("{address}: {e}"))?;
    let mut stream =
        TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map_err(|e| e.to_string())?;
    stream
        .set_read_timeout(Some(Duration::from_secs(3)))
        .map_err(|e| e.to_string())?;
    let versions: ApiVersionsResponse = call(&mut stream, &ApiVersionsRequest::default(), 0, 1)?;
    let max = versions
        .api_keys
        .iter()
        .find(|k| k.api_key == DescribeLogDirsRequest::KEY)
        .map(|k| k.max_version)
        .ok_or("no DescribeLogDirs")?;
    let version = max.min(DescribeLogDirsRequest::VERSIONS.max);
    // No topic list: every topic.
    let answer: DescribeLogDirsResponse = call(
        &mut stream,
        &DescribeLogDirsRequest::default().with_topics(None),
        version,
        2,
    )?;
    let mut lines: Vec<String> = answer
        .results
        .iter()
        .map(|d| {
            let partitions: usize = d.topics.iter().map(|t| t.partitions.len()).sum();
            format!(
                "{}  error {}  total {}  usable {}  partitions {}",
                d.log_dir, d.error_code, d.total_bytes, d.usable_bytes, partitions
            )
        })
        .collect();
    lines.sort();
    Ok((version, lines))
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(id) = args.first().and_then(|a| a.parse::<i32>().ok()) else {
        eprintln!("usage: log_dirs BROKER_ID [SECONDS]");
        std::process::exit(2);
    };
    let seconds: f64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0.0);
    let address = kafka_lab::broker_address(id);
    let start = Instant::now();
    let mut last: Option<Result<(i16, Vec<String>), String>> = None;
    loop {
        let now = describe(&address);
        if last.as_ref() != Some(&now) {
            let t = start.elapsed().as_secs_f64();
            match &now {
                Ok((version, lines)) => {
                    println!("{t:7.2} s  broker {id} (DescribeLogDirs v{version}):");
                    for l in lines {
                        println!("           {l}");
                    }
                }
                Err(e) => println!("{t:7.2} s  broker {id}: {e}"),
            }
            last = Some(now);
        }
        if start.elapsed().as_secs_f64() >= seconds {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
