//! The canary's producer: rdkafka's `BaseProducer` with a thread of its own that serves its
//! delivery reports, as rdkafka's `ThreadedProducer` does, but in calls of one second.
//! rdkafka's `poll` returns only at its deadline, and through the last millisecond before it
//! asks librdkafka for events with a wait of 0 ms again and again (the time left rounds down
//! to 0 ms). At `ThreadedProducer`'s 100 ms calls that spin was 1 % of a core: two thirds
//! of the idle daemon's CPU. A delivery report still wakes the thread at once; only stopping
//! takes up to a second, and happens off the runtime.

use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, KafkaResult};
use rdkafka::producer::{BaseProducer, ProducerContext};

/// One call of the polling thread; its last millisecond is spent spinning.
const POLL: Duration = Duration::from_secs(1);

pub struct Polled<C: ProducerContext + 'static> {
    producer: Arc<BaseProducer<C>>,
    stop: Arc<AtomicBool>,
}

impl<C: ProducerContext + 'static> Polled<C> {
    pub fn create(config: &ClientConfig, context: C) -> KafkaResult<Self> {
        let producer: Arc<BaseProducer<C>> = Arc::new(config.create_with_context(context)?);
        let stop = Arc::new(AtomicBool::new(false));
        let (p, s) = (producer.clone(), stop.clone());
        std::thread::Builder::new()
            .name("canary-producer".into())
            // The thread holds the last handle once the canary let go: the producer's own
            // drop (purge, then up to 500 ms of flush) runs here, not on the runtime.
            .spawn(move || {
                while !s.load(Ordering::Relaxed) {
                    p.poll(POLL);
                }
            })
            .map_err(|e| {
                KafkaError::ClientCreation(format!("cannot start the producer's thread: {e}"))
            })?;
        Ok(Polled { producer, stop })
    }
}

impl<C: ProducerContext + 'static> Deref for Polled<C> {
    type Target = BaseProducer<C>;

    fn deref(&self) -> &BaseProducer<C> {
        &self.producer
    }
}

impl<C: ProducerContext + 'static> Drop for Polled<C> {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
