//! Silences written in the file, checked where they are written.

use super::*;

#[test]
fn example_silences_block_loads_uncommented() {
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let start = shipped
        .find("# silences:\n")
        .expect("the example shows silences");
    let block: String = shipped[start..]
        .lines()
        .take_while(|l| l.starts_with('#'))
        .map(|l| format!("{}\n", l.strip_prefix("# ").unwrap_or("")))
        .collect();
    let text = format!(
        "clusters:\n  - name: payments-eu\n    bootstrap_servers: [\"127.0.0.11:9092\"]\n{block}"
    );
    let c = ok(&text);
    assert_eq!(c.silences.len(), 1);
    let s = &c.silences[0];
    assert_eq!(s.broker, Some(3));
    assert_eq!(s.cluster.as_deref(), Some("payments-eu"));
    assert_eq!(s.origin, crate::model::silence::Origin::Config);
    assert_eq!(s.comment, "disk replacement on broker 3, CHG-4711");
}

#[test]
fn silences_in_the_file_are_checked_where_they_are_written() {
    let got: Vec<String> = problems(&format!(
        "{MINIMAL}silences:\n  - cluster: elsewhere\n    ends_at: '2030-01-01T00:00:00Z'\n    comment: x\n  - ends_at: tomorrow\n    comment: y\n  - kind: zombie\n    ends_at: '2030-01-01T00:00:00Z'\n    comment: z\n  - duration: 2h\n    comment: w\n"
    ))
    .iter()
    .map(short)
    .collect();
    assert_eq!(got.len(), 4, "{got:#?}");
    assert!(
        got[0].starts_with("5:14: silences[0]: cluster 'elsewhere' is not watched"),
        "{got:#?}"
    );
    assert!(
        got[1].starts_with("8:14: silences[1]: ends_at: 'tomorrow' is not an RFC 3339 time"),
        "{got:#?}"
    );
    assert!(
        got[2].starts_with("10:11: silences[2]: kind 'zombie' is unknown"),
        "{got:#?}"
    );
    assert!(
        got.iter().any(|p| p.contains("use ends_at, not duration")),
        "{got:#?}"
    );
    // A window that is over is merely over, not an error: the file may be older than it.
    let c = ok(&format!(
        "{MINIMAL}silences:\n  - ends_at: '2001-01-01T00:00:00Z'\n    comment: old window\n"
    ));
    assert!(!c.silences[0].is_active(std::time::SystemTime::now()));
}
