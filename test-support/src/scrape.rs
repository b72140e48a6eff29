//! `GET /metrics` every 100 ms from a thread of its own, timing each answer: what a
//! Prometheus scraping a watchdog sees while something tries to block it (tests/blocking.rs,
//! the `own-faults --watchdog-faults` bench).

use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::watchdog::http_get_at;

/// The scraping thread; [`stop`](Scraper::stop) ends it and hands back what it saw.
pub struct Scraper {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<Scrapes>,
}

/// Every scrape from the first answer on (before it, the daemon is starting).
#[derive(Debug, Default, Clone)]
pub struct Scrapes {
    pub took: Vec<Duration>,
    /// Requests that failed (no answer within the client's 5 s, a refused connection
    /// after the first answer), with when they were sent, from the first answer.
    pub failed: Vec<(Duration, String)>,
}

impl Scrapes {
    pub fn max(&self) -> Duration {
        self.took.iter().max().copied().unwrap_or_default()
    }

    /// The `q`th quantile (0 to 1) by nearest rank below.
    pub fn quantile(&self, q: f64) -> Duration {
        let mut t = self.took.clone();
        t.sort();
        let i = ((t.len().saturating_sub(1)) as f64 * q) as usize;
        t.get(i).copied().unwrap_or_default()
    }

    pub fn p95(&self) -> Duration {
        self.quantile(0.95)
    }

    pub fn summary(&self) -> String {
        format!(
            "{} scrapes, p95 {:?}, max {:?}, {} failed {:?}",
            self.took.len(),
            self.p95(),
            self.max(),
            self.failed.len(),
            self.failed.iter().take(5).collect::<Vec<_>>()
        )
    }
}

impl Scraper {
    pub fn start(host: IpAddr, port: u16) -> Scraper {
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut s = Scrapes::default();
            let mut first: Option<Instant> = None;
            while !stopping.load(Ordering::SeqCst) {
                let sent = Instant::now();
                match http_get_at(host, port, "/metrics") {
                    Ok((200, _)) => {
                        first.get_or_insert(sent);
                        s.took.push(sent.elapsed());
                    }
                    answer => {
                        if let Some(f) = first {
                            s.failed.push((sent - f, format!("{answer:?}")));
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            s
        });
        Scraper { stop, thread }
    }

    pub fn stop(self) -> Scrapes {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}
