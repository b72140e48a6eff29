//! Blocking work, kept off the async runtime's workers. The daemon's runtime has two worker
//! threads (`cli::commands::runtime`): a worker inside a blocking call (a write and its
//! fsync, a read of `/proc` or of a file on a hung mount, statvfs) serves nothing else until
//! the call returns: no round, no liveness look, no `/metrics`. Every such call goes through
//! a [`Pool`], the one place that moves work to tokio's blocking threads.
//!
//! A pool lets at most `cap` of its calls be unfinished at a time. A thread inside a system
//! call cannot be stopped, so a call that hangs keeps its thread and its place until it
//! returns; the cap is what keeps hung calls from piling up threads without limit (tokio's
//! blocking threads are shared by every pool). Two ways to call:
//!
//! - [`Pool::run`], for reads whose answer is worth nothing late (host mode's `/proc`, the
//!   process's own figures at a scrape): not started when the pool is full, given up by the
//!   caller at its deadline (the call goes on, in its place, until it returns). The caller
//!   hears which, as [`Blocked`], and says so.
//! - [`Pool::finish`], for writes that must happen, in order (the incident book, the webhook
//!   spools): waits for a place without holding a thread, then for the write, however long
//!   it takes, saying in the log when it took longer than `slow`. One writer of a file at a
//!   time keeps its writes in order; a later one never overtakes an abandoned one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::Semaphore;

/// A kind of blocking work, with its cap. Cheap to clone; clones share the cap.
#[derive(Clone, Debug)]
pub struct Pool {
    /// What its calls are, plural, for messages: "host reads".
    kind: &'static str,
    cap: usize,
    places: Arc<Semaphore>,
}

/// Why a call of [`Pool::run`] gave nothing.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Blocked {
    /// Not started: the pool's earlier calls are all still unfinished.
    #[error("{what}: not attempted, {cap} earlier {kind} are still blocked (a process or file system hung in storage)")]
    NotAttempted {
        what: String,
        kind: &'static str,
        cap: usize,
    },
    #[error("{what} took over {secs} s")]
    TookOver { what: String, secs: f64 },
    /// The work panicked (or the runtime is shutting down).
    #[error("{what} failed: {why}")]
    Failed { what: String, why: String },
}

impl Blocked {
    /// The call did not finish, so it says nothing of what it would have found.
    pub fn unfinished(&self) -> bool {
        !matches!(self, Blocked::Failed { .. })
    }
}

impl Pool {
    pub fn new(kind: &'static str, cap: usize) -> Pool {
        Pool {
            kind,
            cap,
            places: Arc::new(Semaphore::new(cap)),
        }
    }

    /// Places free now.
    pub fn free(&self) -> usize {
        self.places.available_permits()
    }

    /// Runs `work` on a blocking thread if the pool has a free place, and waits for it at
    /// most `deadline`. The place goes with the work: past the deadline it is held until
    /// the work really ends.
    pub async fn run<T: Send + 'static>(
        &self,
        what: &str,
        deadline: Duration,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Blocked> {
        let Ok(place) = self.places.clone().try_acquire_owned() else {
            return Err(Blocked::NotAttempted {
                what: what.to_string(),
                kind: self.kind,
                cap: self.cap,
            });
        };
        let task = tokio::task::spawn_blocking(move || {
            let _place = place;
            work()
        });
        match tokio::time::timeout(deadline, task).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(Blocked::Failed {
                what: what.to_string(),
                why: e.to_string(),
            }),
            Err(_) => Err(Blocked::TookOver {
                what: what.to_string(),
                secs: deadline.as_secs_f64(),
            }),
        }
    }

    /// Runs `work` on a blocking thread once the pool has a free place (waiting for one
    /// holds no thread), and waits until it ends, however long: for writes, whose order
    /// and completion matter. One that takes over `slow` is logged when it passes `slow`
    /// and again when it ends, so a slow disk shows in the journal. `Err` only when the
    /// work panicked.
    pub async fn finish<T: Send + 'static>(
        &self,
        what: &str,
        slow: Duration,
        work: impl FnOnce() -> T + Send + 'static,
    ) -> Result<T, Blocked> {
        let failed = |why: String| Blocked::Failed {
            what: what.to_string(),
            why,
        };
        let place = self
            .places
            .clone()
            .acquire_owned()
            .await
            .map_err(|e| failed(e.to_string()))?;
        let started = Instant::now();
        let mut task = tokio::task::spawn_blocking(move || {
            let _place = place;
            work()
        });
        let ended = match tokio::time::timeout(slow, &mut task).await {
            Ok(ended) => ended,
            Err(_) => {
                tracing::warn!(work = what, secs = slow.as_secs_f64(), "{} still unfinished after {} s: the disk is slow or hung; what depends on it waits, the rest goes on", what, slow.as_secs_f64());
                let ended = task.await;
                tracing::warn!(
                    work = what,
                    secs = started.elapsed().as_secs_f64(),
                    "{what} ended after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
                ended
            }
        };
        ended.map_err(|e| failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc;

    #[tokio::test]
    async fn a_full_pool_starts_nothing_more_and_frees_its_place_when_the_call_ends() {
        let pool = Pool::new("test reads", 1);
        let (release, held) = mpsc::channel::<()>();
        let late = pool
            .run("the first", Duration::from_millis(50), move || {
                let _ = held.recv();
            })
            .await;
        assert!(matches!(late, Err(Blocked::TookOver { .. })), "{late:?}");
        let refused = pool.run("the second", Duration::from_secs(5), || 2).await;
        assert_eq!(
            refused.unwrap_err().to_string(),
            "the second: not attempted, 1 earlier test reads are still blocked (a process or file system hung in storage)"
        );
        release.send(()).unwrap();
        // The first ends on its thread, and gives its place back.
        let mut third = Err(Blocked::Failed {
            what: String::new(),
            why: String::new(),
        });
        for _ in 0..100 {
            third = pool.run("the third", Duration::from_secs(5), || 3).await;
            if third.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(third, Ok(3));
    }

    #[tokio::test]
    async fn finish_waits_for_a_place_and_for_the_end() {
        let pool = Pool::new("test writes", 1);
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (a, b) = (order.clone(), order.clone());
        let first = pool.finish("the first", Duration::from_millis(10), move || {
            std::thread::sleep(Duration::from_millis(100));
            a.lock().unwrap().push(1);
        });
        let second = pool.finish("the second", Duration::from_secs(5), move || {
            b.lock().unwrap().push(2);
        });
        let (x, y) = tokio::join!(first, second);
        assert!(x.is_ok() && y.is_ok());
        assert_eq!(*order.lock().unwrap(), vec![1, 2]);
    }

    #[tokio::test]
    async fn a_panic_is_a_failure_not_a_panic_of_the_caller() {
        let pool = Pool::new("test reads", 1);
        let r = pool
            .run("a read", Duration::from_secs(5), || -> u8 {
                panic!("boom")
            })
            .await;
        assert!(matches!(r, Err(Blocked::Failed { .. })), "{r:?}");
        assert!(!r.unwrap_err().unfinished());
    }
}
