//! The path an answer from a broker takes after framing (guard, decode, conversion to the
//! observation types), callable without a socket, for the fuzz targets in `fuzz/`.
//!
//! It calls the functions `connection` and `client` call on every answer, for every type
//! they decode; the fuzzer picks the type and version from its input, so one target
//! covers them all.

use bytes::Bytes;
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AlterPartitionReassignmentsResponse, ApiKey, ApiVersionsResponse,
    DescribeClusterResponse, DescribeConfigsResponse, DescribeLogDirsResponse,
    DescribeQuorumResponse, DescribeTopicPartitionsResponse, ElectLeadersResponse, EndTxnResponse,
    InitProducerIdResponse, ListOffsetsResponse, ListPartitionReassignmentsResponse,
    MetadataResponse, OffsetFetchResponse, ProduceResponse, SaslAuthenticateResponse,
    SaslHandshakeResponse,
};

use super::guard::{self, Guarded};
use super::{
    convert, frame, groups, log_dirs, oauth, partitions, produce, quorum,
    versions::SupportedVersions,
};
use crate::model::round::{LogDirState, QuorumAnswer};

/// The API keys `decode_response_for_fuzzing` handles; the seed test in `guard` checks
/// that each has seeds.
#[cfg(test)]
pub(crate) const FUZZED_API_KEYS: &[i16] = &[
    ApiKey::Produce as i16,
    ApiKey::ListOffsets as i16,
    ApiKey::Metadata as i16,
    ApiKey::SaslHandshake as i16,
    ApiKey::ApiVersions as i16,
    ApiKey::DescribeConfigs as i16,
    ApiKey::SaslAuthenticate as i16,
    ApiKey::ElectLeaders as i16,
    ApiKey::AlterPartitionReassignments as i16,
    ApiKey::ListPartitionReassignments as i16,
    ApiKey::DescribeCluster as i16,
    ApiKey::DescribeTopicPartitions as i16,
    ApiKey::DescribeQuorum as i16,
    ApiKey::OffsetFetch as i16,
    ApiKey::DescribeLogDirs as i16,
    ApiKey::InitProducerId as i16,
    ApiKey::AddOffsetsToTxn as i16,
    ApiKey::EndTxn as i16,
];

/// Runs `body` through what the client does with the answer to a request of `api_key` at
/// `version`. `Err` is a refusal, which is fine; a panic or an allocation out of proportion
/// with `body` is the bug the fuzzer looks for.
#[doc(hidden)]
pub fn decode_response_for_fuzzing(api_key: i16, version: i16, body: &[u8]) -> Result<(), String> {
    let body = Bytes::copy_from_slice(body);
    // The response header is decoded from the same kind of untrusted frame.
    let _ = frame::split_response(body.clone(), 0);
    let _ = frame::split_response(body.clone(), 1);
    let _ = frame::leading_error_code(&body);

    let key = ApiKey::try_from(api_key).map_err(|()| format!("unknown API key {api_key}"))?;
    match key {
        ApiKey::ApiVersions => {
            let r: ApiVersionsResponse = decoded(&body, version)?;
            let _ = SupportedVersions::from_response(&r, version);
        }
        ApiKey::Metadata => {
            convert::metadata_view(decoded::<MetadataResponse>(&body, version)?, version)?;
        }
        ApiKey::DescribeCluster => {
            let r = decoded::<DescribeClusterResponse>(&body, version)?;
            convert::cluster_description(r, version)?;
        }
        ApiKey::DescribeConfigs => {
            let _ = convert::topic_configs(decoded::<DescribeConfigsResponse>(&body, version)?);
        }
        ApiKey::SaslHandshake => {
            let r = decoded::<SaslHandshakeResponse>(&body, version)?;
            let _: Vec<&str> = r.mechanisms.iter().map(|m| m.as_str()).collect();
        }
        ApiKey::SaslAuthenticate => {
            let _ = decoded::<SaslAuthenticateResponse>(&body, version)?;
        }
        ApiKey::Produce => {
            let r = decoded::<ProduceResponse>(&body, version)?;
            // The topic and partition the seeds answer for, so that the search reaches the
            // fields read after the lookup; a lookup that fails is an answer, not a refusal.
            let _ = produce::answer(r, "orders", 1, version);
        }
        ApiKey::ElectLeaders => {
            let _ = partitions::election_outcomes(decoded::<ElectLeadersResponse>(&body, version)?);
        }
        ApiKey::AlterPartitionReassignments => {
            let r = decoded::<AlterPartitionReassignmentsResponse>(&body, version)?;
            let _ = partitions::reassignment_outcomes(r);
        }
        ApiKey::ListPartitionReassignments => {
            let r = decoded::<ListPartitionReassignmentsResponse>(&body, version)?;
            let _ = partitions::ongoing_reassignments(r);
        }
        ApiKey::ListOffsets => {
            let r = decoded::<ListOffsetsResponse>(&body, version)?;
            let _ = partitions::latest_offsets(r);
        }
        ApiKey::DescribeTopicPartitions => {
            let r = decoded::<DescribeTopicPartitionsResponse>(&body, version)?;
            let _ = partitions::eligible_leader_replicas(r);
        }
        ApiKey::DescribeQuorum => {
            let r = decoded::<DescribeQuorumResponse>(&body, version)?;
            let _ = quorum::answer(r, version)?;
        }
        ApiKey::DescribeLogDirs => {
            let r = decoded::<DescribeLogDirsResponse>(&body, version)?;
            let _ = log_dirs::answer(r, version);
        }
        ApiKey::OffsetFetch => {
            let r = decoded::<OffsetFetchResponse>(&body, version)?;
            let _ = groups::answer(r, &["g".to_string()], version);
        }
        ApiKey::InitProducerId => {
            decoded::<InitProducerIdResponse>(&body, version)?;
        }
        ApiKey::AddOffsetsToTxn => {
            decoded::<AddOffsetsToTxnResponse>(&body, version)?;
        }
        ApiKey::EndTxn => {
            decoded::<EndTxnResponse>(&body, version)?;
        }
        other => return Err(format!("the client never decodes {other:?} answers")),
    }
    Ok(())
}

fn decoded<T: Guarded>(body: &Bytes, version: i16) -> Result<T, String> {
    guard::decode::<T>(body, version)
}

/// A DescribeQuorum answer as `BrokerClient::describe_quorum` reads it: the leader's
/// description, a follower's refusal, or the answer's error code (`Ok(Err)`); `Err` when
/// the body is refused.
#[doc(hidden)]
pub fn describe_quorum_for_fuzzing(
    version: i16,
    body: &[u8],
) -> Result<Result<QuorumAnswer, i16>, String> {
    let body = Bytes::copy_from_slice(body);
    quorum::answer(decoded::<DescribeQuorumResponse>(&body, version)?, version)
}

/// A DescribeLogDirs answer as the probe reads it: the directories, or the answer's own
/// error code (`Ok(Err)`); `Err` when the body is refused.
#[doc(hidden)]
pub fn describe_log_dirs_for_fuzzing(
    version: i16,
    body: &[u8],
) -> Result<Result<Vec<LogDirState>, i16>, String> {
    let body = Bytes::copy_from_slice(body);
    let r = decoded::<DescribeLogDirsResponse>(&body, version)?;
    Ok(log_dirs::answer(r, version))
}

/// What the OAUTHBEARER token source does with its endpoint's answer (`TokenSource`'s
/// fetch, without the request): a token and its timers, or the message naming what was
/// wrong; and with a broker's SASL error challenge.
#[doc(hidden)]
pub fn oauth_answer_for_fuzzing(success: bool, body: &[u8]) -> Result<String, String> {
    let challenge = oauth::challenge_status(body);
    if !success {
        return Err(format!("{}{challenge}", oauth::error_detail(body)));
    }
    let token = oauth::token_from_answer(body, std::time::Instant::now(), "client")?;
    Ok(format!("{token:?}{challenge}"))
}
