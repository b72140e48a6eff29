//! Direct connections kept between acks=1 probes. One probe a second per claimed leadership
//! on a fresh connection paid a TCP connect and an ApiVersions exchange each time (with TLS and
//! SASL a handshake and an authentication too): the continuous probes must cost one small
//! request each.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::observe::wire::BrokerClient;

/// Idle connections per broker address (a broker gone for good leaves at most
/// `MAX_IDLE_PER_BROKER` closed sockets behind, found unusable or failing at their next use). A connection is handed to one probe at a time and
/// comes back only after a clean answer: one that timed out or failed may hold a late answer
/// or be half closed, and is dropped.
#[derive(Default)]
pub struct Idle {
    by_address: Mutex<HashMap<String, Vec<Kept>>>,
}

struct Kept {
    client: BrokerClient,
    opened: Instant,
}

/// Probes of one broker run one at a time per partition, so a few connections per broker
/// cover every partition it leads; more would only be sockets nobody uses.
const MAX_IDLE_PER_BROKER: usize = 4;

impl Idle {
    /// A kept connection to `address` that is still usable and within its SASL session,
    /// with when it was opened.
    pub fn take(&self, address: &str) -> Option<(BrokerClient, Instant)> {
        let mut map = self.by_address.lock().unwrap_or_else(|p| p.into_inner());
        let kept = map.get_mut(address)?;
        while let Some(k) = kept.pop() {
            if k.client.is_usable() && !expiring(&k.client, k.opened.elapsed()) {
                return Some((k.client, k.opened));
            }
        }
        None
    }

    /// Keeps a connection that just answered cleanly.
    pub fn put(&self, client: BrokerClient, opened: Instant) {
        if !client.is_usable() || expiring(&client, opened.elapsed()) {
            return;
        }
        let mut map = self.by_address.lock().unwrap_or_else(|p| p.into_inner());
        let kept = map.entry(client.address().to_owned()).or_default();
        if kept.len() < MAX_IDLE_PER_BROKER {
            kept.push(Kept { client, opened });
        }
    }

    #[cfg(test)]
    fn count(&self, address: &str) -> usize {
        let map = self.by_address.lock().unwrap_or_else(|p| p.into_inner());
        map.get(address).map_or(0, Vec::len)
    }
}

/// A SASL session ends when the broker says (KIP-368) and the broker then closes the
/// connection under whatever request is on it: such a close would read as a failed probe of
/// a healthy broker, so the connection is left well before.
fn expiring(client: &BrokerClient, age: Duration) -> bool {
    client
        .session_lifetime()
        .is_some_and(|life| age >= life.mul_f64(0.8))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::wire::WireOptions;
    use kafka_watchdog_test_support::fake_broker::{answer_api_versions, ranges_with, FakeBroker};

    async fn broker() -> FakeBroker {
        FakeBroker::start(|r| answer_api_versions(r, &ranges_with(&[]))).await
    }

    async fn client(b: &FakeBroker) -> BrokerClient {
        BrokerClient::connect(&b.address, &WireOptions::default())
            .await
            .unwrap()
            .client
    }

    #[tokio::test]
    async fn a_connection_comes_back_once_and_goes_to_its_own_broker_only() {
        let (b, other) = (broker().await, broker().await);
        let idle = Idle::default();
        assert!(idle.take(&b.address).is_none());
        idle.put(client(&b).await, Instant::now());
        assert_eq!(idle.count(&b.address), 1);
        assert!(idle.take(&other.address).is_none(), "another broker's");
        let (c, _) = idle.take(&b.address).expect("kept");
        assert_eq!(c.address(), b.address);
        assert!(idle.take(&b.address).is_none(), "handed out: not shared");
        drop(c);
        assert!(
            idle.take(&b.address).is_none(),
            "one that failed is not put back"
        );
    }

    #[tokio::test]
    async fn no_more_than_a_few_are_kept_per_broker() {
        let b = broker().await;
        let idle = Idle::default();
        for _ in 0..MAX_IDLE_PER_BROKER + 2 {
            idle.put(client(&b).await, Instant::now());
        }
        assert_eq!(idle.count(&b.address), MAX_IDLE_PER_BROKER);
    }
}
