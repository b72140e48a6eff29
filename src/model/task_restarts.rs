//! The watchdog's own long-lived tasks that ended when they should not have (a panic, or a
//! loop that returned) and were started again (issue 27 item 5, issue 38 item 1): counted
//! per task and scope for `task_restarts_total`, so a dying task is never silent.
//! Process-wide, as the process metrics are: `supervise` records here, and the page reads it.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// Every supervised task, by the name `task_restarts_total{task}` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Task {
    /// A cluster's round loop (scope: the cluster).
    ClusterLoop,
    /// A broker's liveness check (scope: its address).
    Liveness,
    /// The control plane's looks (scope: the cluster).
    QuorumWatch,
    /// The group coordinator probe (scope: the cluster).
    CoordinatorWatch,
    /// A webhook receiver's delivery (scope: the receiver).
    WebhookWorker,
    /// Routing events to the receivers.
    WebhookDispatcher,
    /// The canary's consumer (scope: the cluster).
    CanaryReader,
    /// The canary's writes (scope: the cluster).
    CanaryWriter,
    /// Asking the other watchdogs (`peers:`).
    Peers,
    /// The HTTP server's accept loop.
    HttpServer,
    /// A remediation action that panicked: its hold on the cluster released (scope: the
    /// cluster). An action is never run again by its supervisor.
    Remediation,
    /// The dead man's switch (`heartbeat:`).
    Heartbeat,
    /// What watches the others' progress: the systemd watchdog, `/healthz`'s blind
    /// clusters.
    Supervisor,
    /// The watchdog's measures of its own health (scope: `tick`, its timer; `cpu`, its
    /// CPU cgroup's reads).
    OwnHealth,
}

impl Task {
    pub const ALL: [Task; 14] = [
        Task::ClusterLoop,
        Task::Liveness,
        Task::QuorumWatch,
        Task::CoordinatorWatch,
        Task::WebhookWorker,
        Task::WebhookDispatcher,
        Task::CanaryReader,
        Task::CanaryWriter,
        Task::Peers,
        Task::HttpServer,
        Task::Remediation,
        Task::Heartbeat,
        Task::Supervisor,
        Task::OwnHealth,
    ];

    /// The metric label; a contract (dashboards and rules may name it).
    pub fn as_str(self) -> &'static str {
        match self {
            Task::ClusterLoop => "cluster_loop",
            Task::Liveness => "liveness",
            Task::QuorumWatch => "quorum_watch",
            Task::CoordinatorWatch => "coordinator_watch",
            Task::WebhookWorker => "webhook_worker",
            Task::WebhookDispatcher => "webhook_dispatcher",
            Task::CanaryReader => "canary_reader",
            Task::CanaryWriter => "canary_writer",
            Task::Peers => "peers",
            Task::HttpServer => "http_server",
            Task::Remediation => "remediation",
            Task::Heartbeat => "heartbeat",
            Task::Supervisor => "supervisor",
            Task::OwnHealth => "own_health",
        }
    }
}

static RESTARTS: Mutex<BTreeMap<(Task, String), u64>> = Mutex::new(BTreeMap::new());

/// Counts one restart of `task` for `scope` (a cluster, a broker, a receiver).
pub fn record(task: Task, scope: &str) {
    let mut r = RESTARTS.lock().unwrap_or_else(|p| p.into_inner());
    *r.entry((task, scope.to_string())).or_insert(0) += 1;
}

/// Every (task, scope, restarts) so far, in order.
pub fn snapshot() -> Vec<(&'static str, String, u64)> {
    let r = RESTARTS.lock().unwrap_or_else(|p| p.into_inner());
    r.iter()
        .map(|((t, s), n)| (t.as_str(), s.clone(), *n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_are_counted_per_task_and_scope() {
        record(Task::Heartbeat, "count-a");
        record(Task::Heartbeat, "count-a");
        record(Task::Heartbeat, "count-b");
        let mine: Vec<_> = snapshot()
            .into_iter()
            .filter(|(t, s, _)| *t == "heartbeat" && s.starts_with("count-"))
            .collect();
        assert_eq!(
            mine,
            vec![
                ("heartbeat", "count-a".into(), 2),
                ("heartbeat", "count-b".into(), 1)
            ]
        );
    }
}
