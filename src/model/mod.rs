//! Model: the plain data every stage shares, with no behaviour beyond reading and printing it.
//! Takes in nothing from the crate; gives out a round's observations (brokers, partitions,
//! answers), bounded label words, the incident kinds, silence rules (and their weekly
//! windows, `schedule`) and the time formats of
//! the state files and webhooks, and the watchdog's own tasks: supervised (started again
//! when they end, `supervise`), counted (`task_restarts`), and their progress watched
//! (`progress`); and the one way blocking work leaves the async runtime (`blocking`), which
//! every stage that touches files or `/proc` uses.

pub mod blocking;
pub mod coordinators;
pub mod kind;
pub mod metric_kit;
pub mod own_health;
pub mod progress;
pub mod round;
pub mod schedule;
pub mod silence;
pub mod supervise;
pub mod task_restarts;
pub mod time;
pub mod words;

/// Tests that hold a generated document to what it is generated from.
#[cfg(test)]
pub(crate) mod generated {
    /// Fails unless the committed file at `path` (from the crate root) is `now`; with
    /// `KW_DOCS_WRITE=1` (or one of `also`, older names) it writes `now` there first.
    /// `how` is the command that rewrites it, for the message.
    pub(crate) fn assert_current(path: &str, now: &str, how: &str, also: &[&str]) {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(path);
        let write = |var: &str| std::env::var(var).is_ok_and(|w| w == "1");
        if write("KW_DOCS_WRITE") || also.iter().any(|v| write(v)) {
            std::fs::write(&path, now).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == now,
            "{} differs from what it is generated from; run `{how}` and commit it",
            path.display()
        );
    }
}
