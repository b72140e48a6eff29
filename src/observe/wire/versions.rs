//! What the broker said it speaks, and the version used for each API as a result.

use std::collections::BTreeMap;

use kafka_protocol::messages::{ApiKey, ApiVersionsResponse};
use kafka_protocol::protocol::{Request, VersionRange};

#[derive(Debug, Clone, PartialEq)]
pub struct SupportedVersions {
    broker: BTreeMap<i16, VersionRange>,
    api_versions: i16,
}

impl SupportedVersions {
    pub(crate) fn from_response(response: &ApiVersionsResponse, api_versions: i16) -> Self {
        let broker = response
            .api_keys
            .iter()
            .map(|k| {
                (
                    k.api_key,
                    VersionRange {
                        min: k.min_version,
                        max: k.max_version,
                    },
                )
            })
            .collect();
        SupportedVersions {
            broker,
            api_versions,
        }
    }

    /// The ApiVersions version the negotiation ended with.
    pub fn api_versions_version(&self) -> i16 {
        self.api_versions
    }

    /// The range the broker announced for an API key, including keys this client does not know.
    pub fn broker_range(&self, api_key: i16) -> Option<VersionRange> {
        self.broker.get(&api_key).copied()
    }

    /// The highest version of an API that both the broker and this client speak.
    pub fn negotiated(&self, api: ApiKey) -> Option<i16> {
        self.pick(api as i16, api.valid_versions())
    }

    pub(crate) fn for_request<R: Request>(&self) -> Option<i16> {
        self.pick(R::KEY, R::VERSIONS)
    }

    /// Like [`for_request`](Self::for_request), but only within `allowed`: for requests whose
    /// content needs a field a version added, or that a later version would change.
    pub(crate) fn for_request_within<R: Request>(&self, allowed: VersionRange) -> Option<i16> {
        self.pick(R::KEY, R::VERSIONS.intersect(&allowed))
    }

    /// The version of `api` the watchdog would use when only `allowed` carries what it wants.
    pub(crate) fn pick_within(&self, api: ApiKey, allowed: VersionRange) -> Option<i16> {
        self.pick(api as i16, api.valid_versions().intersect(&allowed))
    }

    fn pick(&self, key: i16, ours: VersionRange) -> Option<i16> {
        let common = self.broker.get(&key)?.intersect(&ours);
        (!common.is_empty()).then_some(common.max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::messages::api_versions_response::ApiVersion;
    use kafka_protocol::messages::{DescribeClusterRequest, MetadataRequest};

    fn response(ranges: &[(i16, i16, i16)]) -> ApiVersionsResponse {
        ApiVersionsResponse::default().with_api_keys(
            ranges
                .iter()
                .map(|&(k, min, max)| {
                    ApiVersion::default()
                        .with_api_key(k)
                        .with_min_version(min)
                        .with_max_version(max)
                })
                .collect(),
        )
    }

    #[test]
    fn picks_the_highest_common_version() {
        let v = SupportedVersions::from_response(&response(&[(3, 0, 20), (60, 0, 1)]), 3);
        assert_eq!(v.for_request::<MetadataRequest>(), Some(13));
        assert_eq!(v.for_request::<DescribeClusterRequest>(), Some(1));
        assert_eq!(v.negotiated(ApiKey::Metadata), Some(13));
        assert_eq!(v.negotiated(ApiKey::Fetch), None);
        assert_eq!(v.broker_range(3).map(|r| r.max), Some(20));
    }

    #[test]
    fn a_narrower_range_caps_or_excludes() {
        use kafka_protocol::messages::ProduceRequest;
        let v = SupportedVersions::from_response(&response(&[(0, 3, 13)]), 4);
        assert_eq!(v.for_request::<ProduceRequest>(), Some(13));
        let below_13 = VersionRange { min: 0, max: 12 };
        assert_eq!(v.for_request_within::<ProduceRequest>(below_13), Some(12));
        let only_13 = SupportedVersions::from_response(&response(&[(0, 13, 13)]), 4);
        assert_eq!(only_13.for_request_within::<ProduceRequest>(below_13), None);
    }

    #[test]
    fn disjoint_ranges_give_nothing() {
        let v = SupportedVersions::from_response(&response(&[(32, 0, 0)]), 0);
        // DescribeConfigs v0 is below what the crate encodes.
        assert_eq!(v.negotiated(ApiKey::DescribeConfigs), None);
    }
}
