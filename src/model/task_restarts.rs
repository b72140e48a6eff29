//! The watchdog's own long-lived tasks that ended when they should not have (a panic, or a
//! loop that returned) and were started again (issue 27 item 5): counted per task and scope
//! for `task_restarts_total`, so a dying task is never silent. Process-wide, as the process
//! metrics are: whichever stage supervises a task records here, and the page reads it.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Every task that is supervised so.
pub const TASKS: [&str; 6] = [
    "cluster_loop",
    "liveness",
    "quorum_watch",
    "coordinator_watch",
    "webhook_worker",
    "webhook_dispatcher",
];

static RESTARTS: Mutex<BTreeMap<(&'static str, String), u64>> = Mutex::new(BTreeMap::new());

/// Counts one restart of `task` (`cluster_loop`, `liveness`, `quorum_watch`, `coordinator_watch`,
/// `webhook_worker`, `webhook_dispatcher`) for `scope` (a cluster, a broker, a receiver).
pub fn record(task: &'static str, scope: &str) {
    let mut r = RESTARTS.lock().unwrap_or_else(|p| p.into_inner());
    *r.entry((task, scope.to_string())).or_insert(0) += 1;
}

/// Every (task, scope, restarts) so far, in order.
pub fn snapshot() -> Vec<(&'static str, String, u64)> {
    let r = RESTARTS.lock().unwrap_or_else(|p| p.into_inner());
    r.iter().map(|((t, s), n)| (*t, s.clone(), *n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_are_counted_per_task_and_scope() {
        record("test_task", "a");
        record("test_task", "a");
        record("test_task", "b");
        let mine: Vec<_> = snapshot()
            .into_iter()
            .filter(|(t, _, _)| *t == "test_task")
            .collect();
        assert_eq!(
            mine,
            vec![("test_task", "a".into(), 2), ("test_task", "b".into(), 1)]
        );
    }
}
