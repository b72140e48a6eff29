//! The book's state file: kept across restarts, private, replaced whole, errors named.

use super::*;

fn temp_dir(name: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("kw-incident-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn a_restart_neither_forgets_nor_reopens() {
    let dir = temp_dir("restart");
    let rules = h(2, 2);
    let mut book = IncidentBook::new();
    book.observe("lab", vec![zombie("lab", 1), zombie("lab", 2)], rules, t(0));
    book.observe(
        "lab",
        vec![zombie("lab", 1), zombie("lab", 2)],
        rules,
        t(10),
    );
    // Broker 1 starts clearing; broker 3 is pending.
    book.observe(
        "lab",
        vec![zombie("lab", 2), zombie("lab", 3)],
        rules,
        t(20),
    );
    book.save(&dir).unwrap();

    let mut loaded = IncidentBook::load(&dir).unwrap();
    assert_eq!(loaded, book);
    let es = loaded.observe(
        "lab",
        vec![zombie("lab", 2), zombie("lab", 3)],
        rules,
        t(30),
    );
    // Broker 1 resolves (its second clean round), broker 3 opens (its third), broker 2
    // stays open without a second "opened".
    let summary: Vec<(EventKind, Option<i32>)> =
        es.iter().map(|e| (e.kind, e.incident.broker)).collect();
    assert_eq!(
        summary,
        vec![(EventKind::Opened, Some(3)), (EventKind::Resolved, Some(1))]
    );
    assert_eq!(es[0].incident.started_at, t(20));
    assert_eq!(es[1].incident.resolved_at, Some(t(20)));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_state_file_is_private_and_replaced_whole() {
    use std::os::unix::fs::PermissionsExt;
    let dir = temp_dir("mode").join("nested");
    let mut book = IncidentBook::new();
    book.observe("lab", vec![zombie("lab", 1)], h(1, 1), t(0));
    book.save(&dir).unwrap();
    book.save(&dir).unwrap();
    let meta = std::fs::metadata(dir.join(STATE_FILE)).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        names,
        vec![STATE_FILE.to_string()],
        "no temporary file left behind"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn no_state_file_is_an_empty_book() {
    let dir = temp_dir("missing");
    assert_eq!(IncidentBook::load(&dir).unwrap(), IncidentBook::new());
}

#[test]
fn an_unwritable_state_dir_names_the_path_and_the_os_error() {
    // Root ignores permission bits, so the obstacle is a file where a directory must be.
    let base = temp_dir("unwritable");
    std::fs::create_dir_all(&base).unwrap();
    std::fs::write(base.join("file"), b"x").unwrap();
    let dir = base.join("file").join("state");
    let e = IncidentBook::new().save(&dir).unwrap_err();
    assert!(matches!(e, StateError::Write { .. }));
    let msg = e.to_string();
    assert!(
        msg.contains(&dir.join(STATE_FILE).display().to_string()),
        "{msg}"
    );
    assert!(msg.to_lowercase().contains("not a directory"), "{msg}");
    let _ = std::fs::remove_dir_all(&base);
}

#[test]
fn an_unreadable_state_file_is_a_read_error() {
    let dir = temp_dir("unreadable");
    std::fs::create_dir_all(dir.join(STATE_FILE)).unwrap();
    let e = IncidentBook::load(&dir).unwrap_err();
    assert!(matches!(e, StateError::Read { .. }), "{e}");
    assert!(e.to_string().contains(STATE_FILE), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_corrupt_state_file_is_an_error_for_the_caller() {
    let dir = temp_dir("corrupt");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(STATE_FILE), b"{\"version\": 1, \"tracks\": [").unwrap();
    let e = IncidentBook::load(&dir).unwrap_err();
    assert!(matches!(e, StateError::Corrupt { .. }), "{e}");
    assert!(e.to_string().contains("move it aside"), "{e}");
    std::fs::write(dir.join(STATE_FILE), b"{\"version\": 7, \"tracks\": []}").unwrap();
    let e = IncidentBook::load(&dir).unwrap_err();
    assert!(e.to_string().contains("version 7"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The book's writer (issue 38 item 3): changes queued while a write is under way are
/// folded into the next one, each change's events are handed on before the content that
/// records them, in the order they were queued, and the newest content is what stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn changes_queued_during_a_slow_write_are_folded_into_the_next_in_order() {
    use std::sync::{Arc, Mutex};
    let dir = temp_dir("writer");
    let file = Arc::new(super::super::StateWriter::<u32>::new(&dir, "f.json"));
    let handed: Arc<Mutex<Vec<Vec<u32>>>> = Arc::default();
    let (release, held) = tokio::sync::oneshot::channel::<()>();
    assert!(
        file.queue(vec![1], b"one".to_vec()),
        "the first starts a writer"
    );
    let (f, h) = (file.clone(), handed.clone());
    let first = tokio::spawn(async move {
        f.write(|events| async move {
            h.lock().unwrap().push(events);
            // The inbox write that comes first is slow.
            let _ = held.await;
        })
        .await
        .map(|w| w.had_first)
    });
    while handed.lock().unwrap().is_empty() {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(file.queue(vec![2], b"two".to_vec()), "taken: a new writer");
    assert!(
        !file.queue(vec![3], b"three".to_vec()),
        "that writer takes this too"
    );
    let (f, h) = (file.clone(), handed.clone());
    let second = tokio::spawn(async move {
        f.write(|events| async move { h.lock().unwrap().push(events) })
            .await
            .map(|w| w.had_first)
    });
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(!second.is_finished(), "one writer at a time");
    release.send(()).unwrap();
    assert_eq!(first.await.unwrap(), Some(true));
    assert_eq!(second.await.unwrap(), Some(true));
    assert_eq!(*handed.lock().unwrap(), vec![vec![1], vec![2, 3]]);
    assert_eq!(std::fs::read(dir.join("f.json")).unwrap(), b"three");
    assert!(file.write(|_| async {}).await.is_none(), "nothing left");
    let _ = std::fs::remove_dir_all(&dir);
}
