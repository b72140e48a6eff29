//! A structural pre-check of response bodies, run before kafka-protocol decodes them.
//!
//! kafka-protocol 0.18 reserves a `Vec` of the element count read from the wire before it
//! reads the elements. A count of 2^31 in a ten-byte frame then asks the allocator for
//! hundreds of gigabytes, and a failed allocation aborts the whole daemon. This walk follows
//! the same layout as the crate's decoders for the few responses this client reads, and
//! rejects any array that claims more elements than bytes remain, so that what the crate
//! reserves is bounded by the frame size.

use bytes::Bytes;
use kafka_protocol::messages::{
    AddOffsetsToTxnResponse, AlterPartitionReassignmentsResponse, ApiVersionsResponse,
    DescribeClusterResponse, DescribeConfigsResponse, DescribeLogDirsResponse,
    DescribeQuorumResponse, DescribeTopicPartitionsResponse, ElectLeadersResponse, EndTxnResponse,
    InitProducerIdResponse, ListOffsetsResponse, ListPartitionReassignmentsResponse,
    MetadataResponse, OffsetFetchResponse, ProduceResponse, SaslAuthenticateResponse,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::Decodable;

mod reader;

use reader::Check;
pub(crate) use reader::{GuardError, Reader};

/// A response type this client decodes, with the walk that guards its decoding.
pub(crate) trait Guarded: Decodable {
    fn walk(r: &mut Reader<'_>, version: i16) -> Check;
}

/// Decodes a response body after the guard accepted it.
pub(crate) fn decode<T: Guarded>(body: &Bytes, version: i16) -> Result<T, String> {
    T::walk(&mut Reader::new(body), version).map_err(|e| e.to_string())?;
    T::decode(&mut body.clone(), version).map_err(|e| format!("{e:#}"))
}

fn versions(version: i16, min: i16, max: i16) -> Check {
    if (min..=max).contains(&version) {
        Ok(())
    } else {
        Err(GuardError::Version(version))
    }
}

impl Guarded for ApiVersionsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 4)?;
        let flex = v >= 3;
        r.skip(2)?;
        r.array(flex, 6, |r| {
            r.skip(6)?;
            r.plain_tags(flex)
        })?;
        if v >= 1 {
            r.skip(4)?;
        }
        r.tagged_fields(flex, |r, tag| {
            match tag {
                // supported_features and finalized_features: name, two i16, tags.
                0 | 2 => r.array(true, 6, |r| {
                    r.string(true)?;
                    r.skip(4)?;
                    r.plain_tags(true)
                })?,
                1 => r.skip(8)?,
                3 => r.skip(1)?,
                _ => return Ok(false),
            }
            Ok(true)
        })
    }
}

impl Guarded for MetadataResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 13)?;
        let flex = v >= 9;
        if v >= 3 {
            r.skip(4)?;
        }
        r.array(flex, 9, |r| {
            r.skip(4)?;
            r.string(flex)?;
            r.skip(4)?;
            if v >= 1 {
                r.string(flex)?;
            }
            r.plain_tags(flex)
        })?;
        if v >= 2 {
            r.string(flex)?;
        }
        if v >= 1 {
            r.skip(4)?;
        }
        r.array(flex, 3, |r| {
            r.skip(2)?;
            r.string(flex)?;
            if v >= 10 {
                r.skip(16)?;
            }
            if v >= 1 {
                r.skip(1)?;
            }
            r.array(flex, 10, |r| {
                r.skip(10)?;
                if v >= 7 {
                    r.skip(4)?;
                }
                r.int32_array(flex)?;
                r.int32_array(flex)?;
                if v >= 5 {
                    r.int32_array(flex)?;
                }
                r.plain_tags(flex)
            })?;
            if v >= 8 {
                r.skip(4)?;
            }
            r.plain_tags(flex)
        })?;
        if (8..=10).contains(&v) {
            r.skip(4)?;
        }
        if v >= 13 {
            r.skip(2)?;
        }
        r.plain_tags(flex)
    }
}

impl Guarded for DescribeClusterResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 2)?;
        r.skip(4 + 2)?;
        r.string(true)?;
        if v >= 1 {
            r.skip(1)?;
        }
        r.string(true)?;
        r.skip(4)?;
        r.array(true, 10, |r| {
            r.skip(4)?;
            r.string(true)?;
            r.skip(4)?;
            r.string(true)?;
            if v >= 2 {
                r.skip(1)?;
            }
            r.plain_tags(true)
        })?;
        r.skip(4)?;
        r.plain_tags(true)
    }
}

impl Guarded for DescribeConfigsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 1, 4)?;
        let flex = v >= 4;
        r.skip(4)?;
        r.array(flex, 5, |r| {
            r.skip(2)?;
            r.string(flex)?;
            r.skip(1)?;
            r.string(flex)?;
            r.array(flex, 5, |r| {
                r.string(flex)?;
                r.string(flex)?;
                // read_only, config_source, is_sensitive
                r.skip(3)?;
                r.array(flex, 3, |r| {
                    r.string(flex)?;
                    r.string(flex)?;
                    r.skip(1)?;
                    r.plain_tags(flex)
                })?;
                if v >= 3 {
                    r.skip(1)?;
                    r.string(flex)?;
                }
                r.plain_tags(flex)
            })?;
            r.plain_tags(flex)
        })?;
        r.plain_tags(flex)
    }
}

impl Guarded for DescribeTopicPartitionsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 0)?;
        r.skip(4)?;
        r.array(true, 25, |r| {
            r.skip(2)?;
            r.string(true)?;
            // topic id, is_internal
            r.skip(16 + 1)?;
            r.array(true, 20, |r| {
                r.skip(14)?;
                // replicas, ISR, ELR, last known ELR, offline replicas
                for _ in 0..5 {
                    r.int32_array(true)?;
                }
                r.plain_tags(true)
            })?;
            r.skip(4)?;
            r.plain_tags(true)
        })?;
        // The next cursor: a nullable struct, present when its marker byte is 1.
        if r.take(1)?[0] == 1 {
            r.string(true)?;
            r.skip(4)?;
            r.plain_tags(true)?;
        }
        r.plain_tags(true)
    }
}

impl Guarded for DescribeQuorumResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        // Flexible in every version.
        versions(v, 0, 2)?;
        r.skip(2)?;
        if v >= 2 {
            r.string(true)?;
        }
        let replica = |r: &mut Reader<'_>| {
            r.skip(4)?;
            if v >= 2 {
                r.skip(16)?;
            }
            r.skip(8)?;
            if v >= 1 {
                r.skip(16)?;
            }
            r.plain_tags(true)
        };
        let replica_min = 4 + 8 + 1 + if v >= 2 { 16 } else { 0 } + if v >= 1 { 16 } else { 0 };
        r.array(true, 3, |r| {
            r.string(true)?;
            // partition_index, error_code, [error_message], leader_id, leader_epoch,
            // high_watermark, voters, observers, tags
            r.array(true, 4 + 2 + 4 + 4 + 8 + 3, |r| {
                r.skip(6)?;
                if v >= 2 {
                    r.string(true)?;
                }
                r.skip(16)?;
                r.array(true, replica_min, replica)?;
                r.array(true, replica_min, replica)?;
                r.plain_tags(true)
            })?;
            r.plain_tags(true)
        })?;
        if v >= 2 {
            // nodes: node id, listeners (name, host, port, tags), tags
            r.array(true, 6, |r| {
                r.skip(4)?;
                r.array(true, 5, |r| {
                    r.string(true)?;
                    r.string(true)?;
                    r.skip(2)?;
                    r.plain_tags(true)
                })?;
                r.plain_tags(true)
            })?;
        }
        r.plain_tags(true)
    }
}

impl Guarded for SaslHandshakeResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 1)?;
        r.skip(2)?;
        r.array(false, 2, |r| r.string(false))
    }
}

impl Guarded for SaslAuthenticateResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 2)?;
        let flex = v >= 2;
        r.skip(2)?;
        r.string(flex)?;
        r.bytes(flex)?;
        if v >= 1 {
            r.skip(8)?;
        }
        r.plain_tags(flex)
    }
}

impl Guarded for ProduceResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 3, 13)?;
        let flex = v >= 9;
        let topic_min = match (v >= 13, flex) {
            (true, _) => 18,
            (false, true) => 3,
            (false, false) => 6,
        };
        r.array(flex, topic_min, |r| {
            if v >= 13 {
                r.skip(16)?;
            } else {
                r.string(flex)?;
            }
            // index, error_code, base_offset, log_append_time_ms
            r.array(flex, 22, |r| {
                r.skip(22)?;
                if v >= 5 {
                    r.skip(8)?;
                }
                if v >= 8 {
                    r.array(flex, 5, |r| {
                        r.skip(4)?;
                        r.string(flex)?;
                        r.plain_tags(flex)
                    })?;
                    r.string(flex)?;
                }
                r.tagged_fields(flex, |r, tag| {
                    // current_leader: leader id, leader epoch, tags. Below v10 the crate
                    // refuses the tag itself.
                    if tag != 0 || v < 10 {
                        return Ok(false);
                    }
                    r.skip(8)?;
                    r.plain_tags(true)?;
                    Ok(true)
                })
            })?;
            r.plain_tags(flex)
        })?;
        r.skip(4)?;
        r.tagged_fields(flex, |r, tag| {
            // node_endpoints: node id, host, port, rack, tags.
            if tag != 0 || v < 10 {
                return Ok(false);
            }
            r.array(true, 11, |r| {
                r.skip(4)?;
                r.string(true)?;
                r.skip(4)?;
                r.string(true)?;
                r.plain_tags(true)
            })?;
            Ok(true)
        })
    }
}

impl Guarded for ElectLeadersResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 2)?;
        let flex = v >= 2;
        r.skip(4)?;
        if v >= 1 {
            r.skip(2)?;
        }
        r.array(flex, if flex { 3 } else { 6 }, |r| {
            r.string(flex)?;
            r.array(flex, 8, |r| {
                r.skip(6)?;
                r.string(flex)?;
                r.plain_tags(flex)
            })?;
            r.plain_tags(flex)
        })?;
        r.plain_tags(flex)
    }
}

impl Guarded for AlterPartitionReassignmentsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 1)?;
        r.skip(4)?;
        if v >= 1 {
            r.skip(1)?;
        }
        r.skip(2)?;
        r.string(true)?;
        r.array(true, 3, |r| {
            r.string(true)?;
            r.array(true, 8, |r| {
                r.skip(6)?;
                r.string(true)?;
                r.plain_tags(true)
            })?;
            r.plain_tags(true)
        })?;
        r.plain_tags(true)
    }
}

impl Guarded for ListPartitionReassignmentsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 0)?;
        r.skip(4 + 2)?;
        r.string(true)?;
        r.array(true, 3, |r| {
            r.string(true)?;
            r.array(true, 8, |r| {
                r.skip(4)?;
                r.int32_array(true)?;
                r.int32_array(true)?;
                r.int32_array(true)?;
                r.plain_tags(true)
            })?;
            r.plain_tags(true)
        })?;
        r.plain_tags(true)
    }
}

impl Guarded for DescribeLogDirsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 1, 4)?;
        let flex = v >= 2;
        r.skip(4)?;
        if v >= 3 {
            r.skip(2)?;
        }
        r.array(flex, if flex { 5 } else { 8 }, |r| {
            r.skip(2)?;
            r.string(flex)?;
            r.array(flex, if flex { 3 } else { 6 }, |r| {
                r.string(flex)?;
                // partition_index, partition_size, offset_lag, is_future_key
                r.array(flex, 21, |r| {
                    r.skip(21)?;
                    r.plain_tags(flex)
                })?;
                r.plain_tags(flex)
            })?;
            if v >= 4 {
                r.skip(16)?;
            }
            r.plain_tags(flex)
        })?;
        r.plain_tags(flex)
    }
}

// The transaction probe's answers are fixed-size fields and tags: nothing to reserve, yet
// walked, so that a short or odd frame is refused before the crate reads it.
impl Guarded for InitProducerIdResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 4)?;
        // throttle_time_ms, error_code, producer_id, producer_epoch
        r.skip(16)?;
        r.plain_tags(v >= 2)
    }
}

impl Guarded for AddOffsetsToTxnResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 3)?;
        r.skip(6)?;
        r.plain_tags(v >= 3)
    }
}

impl Guarded for EndTxnResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 0, 4)?;
        r.skip(6)?;
        r.plain_tags(v >= 3)
    }
}

impl Guarded for OffsetFetchResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 1, 10)?;
        let flex = v >= 6;
        if v >= 3 {
            r.skip(4)?;
        }
        if v <= 7 {
            r.array(flex, if flex { 3 } else { 6 }, |r| {
                r.string(flex)?;
                // partition_index, committed_offset, [leader epoch], metadata, error_code
                r.array(flex, 16, |r| {
                    r.skip(12)?;
                    if v >= 5 {
                        r.skip(4)?;
                    }
                    r.string(flex)?;
                    r.skip(2)?;
                    r.plain_tags(flex)
                })?;
                r.plain_tags(flex)
            })?;
            if v >= 2 {
                r.skip(2)?;
            }
        } else {
            r.array(true, 5, |r| {
                r.string(true)?;
                r.array(true, 3, |r| {
                    // v8-9 the topic's name, v10 its id
                    if v >= 10 {
                        r.skip(16)?;
                    } else {
                        r.string(true)?;
                    }
                    // partition_index, committed_offset, leader epoch, metadata, error_code
                    r.array(true, 20, |r| {
                        r.skip(16)?;
                        r.string(true)?;
                        r.skip(2)?;
                        r.plain_tags(true)
                    })?;
                    r.plain_tags(true)
                })?;
                r.skip(2)?;
                r.plain_tags(true)
            })?;
        }
        r.plain_tags(flex)
    }
}

impl Guarded for ListOffsetsResponse {
    fn walk(r: &mut Reader<'_>, v: i16) -> Check {
        versions(v, 1, 10)?;
        let flex = v >= 6;
        if v >= 2 {
            r.skip(4)?;
        }
        r.array(flex, if flex { 3 } else { 6 }, |r| {
            r.string(flex)?;
            // partition_index, error_code, timestamp, offset
            r.array(flex, 22, |r| {
                r.skip(22)?;
                if v >= 4 {
                    r.skip(4)?;
                }
                r.plain_tags(flex)
            })?;
            r.plain_tags(flex)
        })?;
        r.plain_tags(flex)
    }
}
