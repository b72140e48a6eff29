//! The watchdog's own long-lived tasks, supervised (issue 38 item 1): a task that ends when
//! it should not (it returned, or it panicked) is started again after a capped exponential
//! backoff, counted for `task_restarts_total` and logged as an error with its panic. One
//! helper for every task, so none keeps revive logic of its own and none can die unnoticed:
//! before it, the canary's reader and writer, the peers task and the HTTP server stayed
//! dead, and the others were looked at once a second by code written once per task.
//!
//! Shared by every stage that runs tasks, as the count it feeds is (`task_restarts`).

use std::future::Future;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use crate::model::task_restarts::Task;

/// How long a task that ended waits before it starts again: `first`, doubled at each end
/// in a row up to `max`. A task that ran at least `max` before it ended starts over at
/// `first`: it is a new failure, not the same one again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Backoff {
    pub first: Duration,
    pub max: Duration,
}

/// Seconds after a first death; a task that keeps dying is tried every 10 s, which logs
/// six lines a minute and costs a cluster loop its connections no more often than a round.
pub const BACKOFF: Backoff = Backoff {
    first: Duration::from_secs(1),
    max: Duration::from_secs(10),
};

/// Runs `start()`'s task until the returned handle is aborted (which aborts the task too),
/// starting it again whenever it ends.
pub fn spawn<F, Fut>(task: Task, scope: impl Into<String>, start: F) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(supervise(task, scope.into(), None, start, BACKOFF))
}

/// The same for a task that ends on purpose once `stop` turns true (or its sender is
/// gone): then the handle ends too, and a wait for a restart is cut short.
pub fn spawn_until<F, Fut>(
    task: Task,
    scope: impl Into<String>,
    stop: watch::Receiver<bool>,
    start: F,
) -> JoinHandle<()>
where
    F: FnMut() -> Fut + Send + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    tokio::spawn(supervise(task, scope.into(), Some(stop), start, BACKOFF))
}

/// A one-shot task (a remediation action): never started again, but a panic is logged and
/// counted like any task's, so it is never silent. What it held is released by its own
/// drop guards as the panic unwinds.
pub fn spawn_once<Fut>(task: Task, scope: impl Into<String>, work: Fut) -> JoinHandle<()>
where
    Fut: Future<Output = ()> + Send + 'static,
{
    let scope = scope.into();
    tokio::spawn(async move {
        let mut running = AbortOnDrop(tokio::spawn(work));
        if let Err(e) = (&mut running.0).await {
            if e.is_panic() {
                crate::model::task_restarts::record(task, &scope);
                tracing::error!(
                    task = task.as_str(),
                    scope = %scope,
                    "a {} task panicked: {}; what it held is released",
                    task.as_str(),
                    panic_text(e.into_panic())
                );
            }
        }
    })
}

/// A task that is aborted when its supervisor is: aborting the handle `spawn` returns
/// drops the supervisor's future, and with it this.
struct AbortOnDrop(JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn stopped(stop: &Option<watch::Receiver<bool>>) -> bool {
    stop.as_ref()
        .is_some_and(|s| *s.borrow() || s.has_changed().is_err())
}

/// Returns once `stop` is set; never without one.
async fn stop_asked(stop: &mut Option<watch::Receiver<bool>>) {
    match stop {
        Some(s) => {
            let _ = s.wait_for(|v| *v).await;
        }
        None => std::future::pending().await,
    }
}

async fn supervise<F, Fut>(
    task: Task,
    scope: String,
    mut stop: Option<watch::Receiver<bool>>,
    mut start: F,
    backoff: Backoff,
) where
    F: FnMut() -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut delay = backoff.first;
    loop {
        let began = tokio::time::Instant::now();
        let mut running = AbortOnDrop(tokio::spawn(start()));
        let ended = (&mut running.0).await;
        if stopped(&stop) {
            return;
        }
        let why = match ended {
            Ok(()) => "it returned".to_string(),
            Err(e) if e.is_panic() => format!("it panicked: {}", panic_text(e.into_panic())),
            // Cancelled, and not by us: the runtime is going down.
            Err(_) => return,
        };
        if began.elapsed() >= backoff.max {
            delay = backoff.first;
        }
        crate::model::task_restarts::record(task, &scope);
        tracing::error!(
            task = task.as_str(),
            scope = %scope,
            restart_in_ms = delay.as_millis() as u64,
            "a {} task ended when it should not have: {why}; starting it again",
            task.as_str()
        );
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = stop_asked(&mut stop) => return,
        }
        delay = (delay * 2).min(backoff.max);
    }
}

/// What a panic said, when it said it in words.
fn panic_text(payload: Box<dyn std::any::Any + Send>) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "(no message)".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    fn restarts(task: Task, scope: &str) -> u64 {
        crate::model::task_restarts::snapshot()
            .into_iter()
            .find(|(t, s, _)| *t == task.as_str() && s == scope)
            .map_or(0, |(_, _, n)| n)
    }

    /// Starts counted by `starts`; the first `panics` of them panic, later ones run until
    /// aborted.
    fn flaky(
        starts: &Arc<AtomicU32>,
        panics: u32,
    ) -> impl FnMut() -> std::pin::Pin<Box<dyn Future<Output = ()> + Send>> {
        let starts = starts.clone();
        move || {
            let n = starts.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                if n <= panics {
                    panic!("test panic {n}");
                }
                std::future::pending::<()>().await;
            })
        }
    }

    /// A task that panics is started again, after 1, 2, 4, 8, then 10 s, and each end is
    /// counted; once it stays up, nothing more happens.
    #[tokio::test(start_paused = true)]
    async fn a_panicking_task_is_started_again_with_a_capped_backoff_and_counted() {
        let starts = Arc::new(AtomicU32::new(0));
        let t0 = tokio::time::Instant::now();
        let handle = spawn(Task::Liveness, "backoff-test", flaky(&starts, 6));
        let mut seen = Vec::new();
        for _ in 0..80 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let n = starts.load(Ordering::SeqCst);
            if seen.last().is_none_or(|(m, _)| *m != n) {
                seen.push((n, t0.elapsed().as_secs()));
            }
        }
        // Started at 0, then 1, 3, 7, 15, 25 and 35 s.
        assert_eq!(
            seen,
            vec![(1, 0), (2, 1), (3, 3), (4, 7), (5, 15), (6, 25), (7, 35)]
        );
        assert_eq!(restarts(Task::Liveness, "backoff-test"), 6);
        assert!(!handle.is_finished());
        handle.abort();
    }

    /// A task that returned is an end too (a loop that fell out of itself).
    #[tokio::test(start_paused = true)]
    async fn a_task_that_returns_is_started_again() {
        let starts = Arc::new(AtomicU32::new(0));
        let s = starts.clone();
        let handle = spawn(Task::QuorumWatch, "returns-test", move || {
            s.fetch_add(1, Ordering::SeqCst);
            async {}
        });
        tokio::time::sleep(Duration::from_millis(3500)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 3, "at 0, 1 and 3 s");
        handle.abort();
    }

    /// Aborting the supervisor aborts the task: a watch dropped takes its task with it.
    #[tokio::test(start_paused = true)]
    async fn aborting_the_handle_ends_the_task() {
        struct Dropped(Arc<AtomicU32>);
        impl Drop for Dropped {
            fn drop(&mut self) {
                self.0.fetch_add(1, Ordering::SeqCst);
            }
        }
        let dropped = Arc::new(AtomicU32::new(0));
        let d = dropped.clone();
        let handle = spawn(Task::CanaryReader, "abort-test", move || {
            let guard = Dropped(d.clone());
            async move {
                let _guard = guard;
                std::future::pending::<()>().await;
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        handle.abort();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        assert_eq!(restarts(Task::CanaryReader, "abort-test"), 0);
    }

    /// A task asked to stop ends for good, uncounted; a stop during the wait for a restart
    /// ends the wait.
    #[tokio::test(start_paused = true)]
    async fn a_stopped_task_is_not_started_again() {
        let (tx, rx) = watch::channel(false);
        let told = rx.clone();
        let handle = spawn_until(Task::Peers, "stop-test", rx, move || {
            let mut stop = told.clone();
            async move {
                let _ = stop.wait_for(|v| *v).await;
            }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_secs(1), handle)
            .await
            .expect("ends with its task")
            .unwrap();
        assert_eq!(restarts(Task::Peers, "stop-test"), 0);

        let (tx, rx) = watch::channel(false);
        let starts = Arc::new(AtomicU32::new(0));
        let handle = spawn_until(Task::Peers, "stop-wait-test", rx, flaky(&starts, 100));
        tokio::time::sleep(Duration::from_millis(500)).await;
        tx.send(true).unwrap();
        tokio::time::timeout(Duration::from_millis(100), handle)
            .await
            .expect("the wait for a restart is cut short")
            .unwrap();
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }

    /// A one-shot task's panic is counted and said, and it is not run again.
    #[tokio::test]
    async fn a_one_shot_task_that_panics_is_counted_not_repeated() {
        let starts = Arc::new(AtomicU32::new(0));
        let s = starts.clone();
        spawn_once(Task::Remediation, "once-test", async move {
            s.fetch_add(1, Ordering::SeqCst);
            panic!("action broke");
        })
        .await
        .unwrap();
        assert_eq!(restarts(Task::Remediation, "once-test"), 1);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert_eq!(starts.load(Ordering::SeqCst), 1);
    }

    #[test]
    fn every_task_has_its_own_label() {
        let mut labels: Vec<_> = Task::ALL.iter().map(|t| t.as_str()).collect();
        labels.sort();
        labels.dedup();
        assert_eq!(labels.len(), Task::ALL.len());
    }
}
