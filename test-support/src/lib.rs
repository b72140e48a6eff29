//! What kafka-watchdog's tests and benchmarks share, written once:
//!
//! - [`fake_broker`]: an in-process Kafka broker whose answers a test scripts (the wire and
//!   probe unit tests) or a benchmark precomputes (the probe fan-out benchmark);
//! - [`fake_aws`]: the AWS endpoints that hand out credentials (instance metadata, container
//!   credentials, STS web identity), for the AWS_MSK_IAM credential chain's tests;
//! - [`fake_slack`]: Slack's Web API as far as the watchdog's Slack bot uses it
//!   (`chat.postMessage`, `chat.update`), recording every call (the notify unit tests and
//!   the Slack lab test);
//! - [`secret_volume`]: a Kubernetes Secret mounted as the kubelet does (`..data` links),
//!   updated in one atomic swap (the credential rotation tests);
//! - [`watchdog`]: the real `kafka-watchdog` process started with a given config, waited for
//!   until ready, read over its HTTP surface, killed when dropped (the integration tests and
//!   the lab benchmarks).

#![forbid(unsafe_code)]

pub mod fake_aws;
pub mod fake_broker;
pub mod fake_slack;
pub mod secret_volume;
pub mod watchdog;
