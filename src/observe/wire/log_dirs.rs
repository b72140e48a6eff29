//! DescribeLogDirs (API 35): a broker's log directories, each with its error code (56
//! KAFKA_STORAGE_ERROR for a directory Kafka took offline) and, from v4 (Kafka 3.3,
//! KIP-827), its total and usable bytes. Asked for no topic, so the answer lists the
//! directories and nothing of their partitions: a few bytes per directory whatever the
//! broker holds.

use kafka_protocol::messages::{DescribeLogDirsRequest, DescribeLogDirsResponse};

pub use crate::model::round::LogDirState;

/// The first version with a directory's total and usable bytes (KIP-827).
pub(crate) const SPACE: i16 = 4;

pub(crate) fn request() -> DescribeLogDirsRequest {
    DescribeLogDirsRequest::default().with_topics(Some(Vec::new()))
}

/// The directories, or the answer's own error code (v3+) when it has one.
pub(crate) fn answer(
    response: DescribeLogDirsResponse,
    version: i16,
) -> Result<Vec<LogDirState>, i16> {
    if response.error_code != 0 {
        return Err(response.error_code);
    }
    Ok(response
        .results
        .into_iter()
        .map(|r| LogDirState {
            dir: r.log_dir.to_string(),
            error_code: r.error_code,
            // Before v4 the fields are absent; Kafka sends -1 when it cannot tell.
            total_bytes: (version >= SPACE && r.total_bytes >= 0).then_some(r.total_bytes as u64),
            usable_bytes: (version >= SPACE && r.usable_bytes >= 0)
                .then_some(r.usable_bytes as u64),
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResult;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn dirs() -> DescribeLogDirsResponse {
        DescribeLogDirsResponse::default().with_results(vec![
            DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_static_str("/data/a"))
                .with_total_bytes(1000)
                .with_usable_bytes(400),
            DescribeLogDirsResult::default()
                .with_log_dir(StrBytes::from_static_str("/data/b"))
                .with_error_code(56)
                .with_total_bytes(-1)
                .with_usable_bytes(-1),
        ])
    }

    fn through_the_guard(r: &DescribeLogDirsResponse, v: i16) -> DescribeLogDirsResponse {
        let mut buf = BytesMut::new();
        r.encode(&mut buf, v).unwrap();
        crate::observe::wire::guard::decode(&buf.freeze(), v).unwrap()
    }

    #[test]
    fn directories_with_their_errors_and_space() {
        let got = answer(through_the_guard(&dirs(), 4), 4).unwrap();
        assert_eq!(
            got,
            vec![
                LogDirState {
                    dir: "/data/a".into(),
                    error_code: 0,
                    total_bytes: Some(1000),
                    usable_bytes: Some(400)
                },
                LogDirState {
                    dir: "/data/b".into(),
                    error_code: 56,
                    total_bytes: None,
                    usable_bytes: None
                },
            ]
        );
        // v1 has no space fields.
        let got = answer(through_the_guard(&dirs(), 1), 1).unwrap();
        assert!(got.iter().all(|d| d.total_bytes.is_none()));
        assert_eq!(got[1].error_code, 56);
    }

    #[test]
    fn a_whole_answer_error_is_returned() {
        let r = dirs().with_error_code(31);
        assert_eq!(answer(through_the_guard(&r, 3), 3), Err(31));
        assert!(request().topics.is_some_and(|t| t.is_empty()));
    }
}
