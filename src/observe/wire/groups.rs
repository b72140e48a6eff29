//! OffsetFetch (API 9) for consumer groups, as the coordinator probe sends it: the committed
//! offsets of groups, each answered by the group's coordinator. v8+ (Kafka 3.0, KIP-709)
//! asks for many groups in one request; v2 to v7 one group per request. The probe asks for
//! every topic of a group (a null topic list), since its synthetic groups commit little or
//! nothing and the answer stays a few bytes.

use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestGroup;
use kafka_protocol::messages::{GroupId, OffsetFetchRequest, OffsetFetchResponse};
use kafka_protocol::protocol::StrBytes;

/// The first version that asks for many groups in one request.
pub(crate) const BATCHED: i16 = 8;
/// The first version with a null topic list ("every topic of the group").
pub(crate) const ALL_TOPICS: i16 = 2;

/// The request for `groups`: all of them at v8+, only the first before that.
pub(crate) fn request(groups: &[String], version: i16) -> OffsetFetchRequest {
    let id = |g: &String| GroupId(StrBytes::from_string(g.clone()));
    if version >= BATCHED {
        OffsetFetchRequest::default().with_groups(
            groups
                .iter()
                .map(|g| {
                    OffsetFetchRequestGroup::default()
                        .with_group_id(id(g))
                        .with_member_epoch(-1)
                        .with_topics(None)
                })
                .collect(),
        )
    } else {
        OffsetFetchRequest::default()
            .with_group_id(groups.first().map(id).unwrap_or_default())
            .with_topics(None)
    }
}

/// Each asked group's error code (0: answered by its coordinator), in the order asked. A
/// group the answer leaves out gets `None`; before v8 the one group gets the answer's code.
pub(crate) fn answer(
    response: OffsetFetchResponse,
    groups: &[String],
    version: i16,
) -> Vec<(String, Option<i16>)> {
    if version >= BATCHED {
        groups
            .iter()
            .map(|g| {
                let code = response
                    .groups
                    .iter()
                    .find(|a| a.group_id.0.as_str() == g.as_str())
                    .map(|a| a.error_code);
                (g.clone(), code)
            })
            .collect()
    } else {
        groups
            .iter()
            .take(1)
            .map(|g| (g.clone(), Some(response.error_code)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::messages::offset_fetch_response::OffsetFetchResponseGroup;
    use kafka_protocol::protocol::Encodable;

    fn groups() -> Vec<String> {
        vec!["a".into(), "b".into(), "c".into()]
    }

    #[test]
    fn batched_requests_carry_every_group_and_older_ones_the_first() {
        let r = request(&groups(), 8);
        assert_eq!(r.groups.len(), 3);
        assert!(r.groups.iter().all(|g| g.topics.is_none()));
        let r = request(&groups(), 7);
        assert_eq!(r.group_id.0.as_str(), "a");
        assert!(r.groups.is_empty() && r.topics.is_none());
    }

    #[test]
    fn each_group_gets_its_own_code_and_a_missing_one_none() {
        let response = OffsetFetchResponse::default().with_groups(vec![
            OffsetFetchResponseGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("a"))),
            OffsetFetchResponseGroup::default()
                .with_group_id(GroupId(StrBytes::from_static_str("b")))
                .with_error_code(14),
        ]);
        // Through the guard and the crate's decoder, as the client reads it.
        let mut buf = BytesMut::new();
        response.encode(&mut buf, 9).unwrap();
        let decoded: OffsetFetchResponse =
            crate::observe::wire::guard::decode(&buf.freeze(), 9).unwrap();
        assert_eq!(
            answer(decoded, &groups(), 9),
            vec![
                ("a".to_string(), Some(0)),
                ("b".to_string(), Some(14)),
                ("c".to_string(), None)
            ]
        );
    }

    #[test]
    fn before_v8_the_answers_code_is_the_groups() {
        let response = OffsetFetchResponse::default().with_error_code(16);
        let mut buf = BytesMut::new();
        response.encode(&mut buf, 7).unwrap();
        let decoded: OffsetFetchResponse =
            crate::observe::wire::guard::decode(&buf.freeze(), 7).unwrap();
        assert_eq!(
            answer(decoded, &groups(), 7),
            vec![("a".to_string(), Some(16))]
        );
    }
}
