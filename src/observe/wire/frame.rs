//! Kafka framing: every message is `[i32 length][header][body]`, big-endian.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Reads grow the buffer in steps of at most this much, so a peer that announces a large frame
/// and then sends little costs little memory.
const READ_CHUNK: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    #[error(transparent)]
    Io(#[from] std::io::Error),
    #[error("frame length {0} is negative")]
    Negative(i32),
    #[error("frame length {length} exceeds the limit of {limit} bytes")]
    TooLarge { length: usize, limit: usize },
}

/// Checks a length prefix before anything is allocated for the frame it announces.
pub(crate) fn checked_length(prefix: [u8; 4], limit: usize) -> Result<usize, FrameError> {
    let length = i32::from_be_bytes(prefix);
    let length = usize::try_from(length).map_err(|_| FrameError::Negative(length))?;
    if length > limit {
        return Err(FrameError::TooLarge { length, limit });
    }
    Ok(length)
}

pub(crate) async fn read_frame<S>(stream: &mut S, limit: usize) -> Result<Bytes, FrameError>
where
    S: AsyncRead + Unpin,
{
    let mut prefix = [0u8; 4];
    stream.read_exact(&mut prefix).await?;
    let length = checked_length(prefix, limit)?;
    let mut frame = BytesMut::with_capacity(length.min(READ_CHUNK));
    while frame.len() < length {
        let wanted = (length - frame.len()).min(READ_CHUNK);
        frame.reserve(wanted);
        // `take` stops the read at this frame's end even when `reserve` gave more room.
        let n = (&mut *stream)
            .take(wanted as u64)
            .read_buf(&mut frame)
            .await?;
        if n == 0 {
            return Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof).into());
        }
    }
    Ok(frame.freeze())
}

pub(crate) async fn write_frame<S>(stream: &mut S, frame: &[u8]) -> std::io::Result<()>
where
    S: AsyncWrite + Unpin,
{
    stream.write_all(frame).await?;
    stream.flush().await
}

/// Encodes one request with its length prefix; the header version follows from the API and
/// version (v2, with tagged fields, for flexible versions).
pub(crate) fn encode_request<R: Request>(
    request: &R,
    version: i16,
    correlation_id: i32,
    client_id: &StrBytes,
) -> Result<Bytes, String> {
    let header = RequestHeader::default()
        .with_request_api_key(R::KEY)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(client_id.clone()));
    let mut buf = BytesMut::with_capacity(128);
    buf.put_i32(0);
    header
        .encode(&mut buf, R::header_version(version))
        .map_err(|e| format!("cannot encode request header: {e:#}"))?;
    request
        .encode(&mut buf, version)
        .map_err(|e| format!("cannot encode request v{version}: {e:#}"))?;
    let length = i32::try_from(buf.len() - 4).map_err(|_| "request too large".to_owned())?;
    buf[..4].copy_from_slice(&length.to_be_bytes());
    Ok(buf.freeze())
}

/// Splits a response frame into its correlation id and body.
pub(crate) fn split_response(
    mut frame: Bytes,
    header_version: i16,
) -> Result<(i32, Bytes), String> {
    // The header's only variable part is its tagged fields, which the crate reads with bounds
    // checks and without reserving memory from counts.
    let header = ResponseHeader::decode(&mut frame, header_version)
        .map_err(|e| format!("cannot decode response header: {e:#}"))?;
    Ok((header.correlation_id, frame))
}

/// The first field of every ApiVersions response body, whatever its version.
pub(crate) fn leading_error_code(body: &Bytes) -> Option<i16> {
    (body.len() >= 2).then(|| (&body[..2]).get_i16())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_prefix_is_checked_before_allocation() {
        assert!(matches!(
            checked_length(i32::MAX.to_be_bytes(), 100 << 20),
            Err(FrameError::TooLarge { length, .. }) if length == i32::MAX as usize
        ));
        assert!(matches!(
            checked_length((-5i32).to_be_bytes(), 100 << 20),
            Err(FrameError::Negative(-5))
        ));
        assert_eq!(checked_length(10i32.to_be_bytes(), 100).unwrap(), 10);
        assert_eq!(checked_length(100i32.to_be_bytes(), 100).unwrap(), 100);
    }

    #[tokio::test]
    async fn reads_a_frame_delivered_in_pieces() {
        let (mut a, mut b) = tokio::io::duplex(8);
        let writer = tokio::spawn(async move {
            let mut data = 200_000i32.to_be_bytes().to_vec();
            data.extend(std::iter::repeat_n(7u8, 200_000));
            a.write_all(&data).await.unwrap();
        });
        let frame = read_frame(&mut b, 1 << 20).await.unwrap();
        assert_eq!(frame.len(), 200_000);
        assert!(frame.iter().all(|&x| x == 7));
        writer.await.unwrap();
    }

    #[tokio::test]
    async fn truncated_frame_is_end_of_stream() {
        let (mut a, mut b) = tokio::io::duplex(64);
        a.write_all(&[0, 0, 0, 10, 1, 2, 3]).await.unwrap();
        drop(a);
        let err = read_frame(&mut b, 1 << 20).await.unwrap_err();
        assert!(
            matches!(err, FrameError::Io(ref e) if e.kind() == std::io::ErrorKind::UnexpectedEof)
        );
    }
}
