//! Hostile input: aliases, nesting, bytes that are not UTF-8, random and mutated files.

use super::*;

#[test]
fn aliases_work_within_budget() {
    let text = "\
x-common: &common
  round_interval_secs: 5
clusters:
  - name: a
    bootstrap_servers: &servers [a:1, b:1]
  - name: b
    bootstrap_servers: *servers
x-end: *common
";
    let got = problems(text);
    // The x- keys are unknown, but the aliases themselves are fine.
    assert_eq!(got.len(), 2, "{got:#?}");
    assert!(got.iter().all(|p| p.message.starts_with("unknown key 'x-")));
}

#[test]
fn alias_bomb_is_refused() {
    let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
    for i in 1..12 {
        let p = i - 1;
        text.push_str(&format!(
            "a{i}: &a{i} [*a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}, *a{p}]\n"
        ));
    }
    text.push_str(MINIMAL);
    let started = std::time::Instant::now();
    let got = problems(&text);
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(got.len(), 1, "{got:#?}");
    assert!(
        got[0]
            .message
            .starts_with("the document expands to more than 100000 YAML nodes"),
        "{got:#?}"
    );
    assert_eq!(
        got[0].expected.as_deref(),
        Some("a configuration without alias bombs")
    );
}

#[test]
fn deep_nesting_is_refused() {
    // Past the schema's few levels, below the parser's own limit: refused here.
    let text = format!("{}{}", "[".repeat(100), "]".repeat(100));
    let got = problems(&text);
    assert_eq!(got.len(), 1);
    assert_eq!(
        short(&got[0]),
        "1:65: nesting deeper than 64 levels (expected a configuration of a few levels)"
    );
    // Far deeper: the parser's recursion limit answers first. Either way, one problem.
    for text in [
        format!("{}{}", "[".repeat(100_000), "]".repeat(100_000)),
        format!("a: {}", "{a: ".repeat(100_000)),
        "- ".repeat(10_000),
    ] {
        let got = problems(&text);
        assert_eq!(got.len(), 1, "{got:#?}");
    }
}

#[test]
fn not_utf8_is_one_problem() {
    let dir = temp_dir();
    let path = dir.join("bin.yaml");
    std::fs::write(&path, b"clusters:\n  - name: \xff\xfe\n").unwrap();
    let err = load(&path).unwrap_err();
    let ConfigError::Invalid { problems } = &err else {
        panic!("{err}")
    };
    assert_eq!(problems.len(), 1);
    assert_eq!((problems[0].line, problems[0].column), (2, 11));
    assert_eq!(problems[0].message, "the file is not UTF-8 text");

    let big = dir.join("big.yaml");
    std::fs::write(&big, vec![b'#'; 5 * 1024 * 1024]).unwrap();
    let err = load(&big).unwrap_err();
    assert!(
        err.to_string()
            .starts_with(&format!("{}:1:1: the file is larger than", big.display())),
        "{err}"
    );

    let err = load(&dir.join("absent.yaml")).unwrap_err();
    assert!(matches!(err, ConfigError::Io { .. }), "{err}");
    assert!(err.to_string().starts_with("cannot read "));
}

#[test]
fn odd_yaml_features() {
    // Tags: !!str makes text; custom tags are refused; a BOM is ignored.
    assert_eq!(
        one(&cluster_with("round_interval_secs: !!str 5")),
        "4:26: wrong type for round_interval_secs: the text '5' (expected an integer from 1 to 3600)"
    );
    assert_eq!(
        one(&cluster_with("round_interval_secs: !custom 30")),
        "4:26: YAML tag '!custom' is not supported here (expected an untagged value)"
    );
    ok(&format!("\u{feff}{MINIMAL}"));
    // Complex keys.
    assert_eq!(
        one(&format!("{MINIMAL}? [a]\n: b\n")),
        "4:3: a list used as a mapping key (expected a plain key name)"
    );
    // Hex and octal integers follow YAML 1.2.
    let c = ok(&cluster_with(
        "round_interval_secs: 0x10\nrequest_timeout_ms: 0o17",
    ));
    assert_eq!(c.clusters[0].timing.round_interval, Duration::from_secs(16));
    assert_eq!(
        c.clusters[0].timing.request_timeout,
        Duration::from_millis(15)
    );
}

/// A small deterministic generator: the test must not depend on an RNG crate, and a
/// failure must reproduce.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn check_never_panics(text: &str) {
    let result = std::panic::catch_unwind(|| parse_with_env(text, "fuzz.yaml", &no_env));
    match result {
        Err(_) => panic!("panicked on input {text:?}"),
        Ok(Ok(_)) => {}
        Ok(Err(ConfigError::Invalid { problems })) => {
            assert!(!problems.is_empty(), "{text:?}");
            for p in &problems {
                assert!(p.line >= 1 && p.column >= 1, "{p:?} for {text:?}");
                assert!(!p.message.is_empty());
            }
        }
        Ok(Err(e)) => panic!("unexpected {e} for {text:?}"),
    }
}

#[test]
fn random_input_never_panics() {
    let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
    let alphabet: Vec<char> = "abc:-[]{}&*!|>'\"#%@`,?~ \n\t\r0123456789.\\é\u{0}\u{feff}"
        .chars()
        .collect();
    for _ in 0..400 {
        let len = rng.below(200);
        let text: String = (0..len)
            .map(|_| alphabet[rng.below(alphabet.len())])
            .collect();
        check_never_panics(&text);
        let bytes: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        check_never_panics(&String::from_utf8_lossy(&bytes));
    }
}

#[test]
fn mutated_configs_never_panic() {
    let seeds = [
        include_str!("../../../config/example.yaml"),
        include_str!("../../../config/lab.yaml"),
        include_str!("../../../config/lab-sasl.yaml"),
    ];
    let mut rng = XorShift(42);
    let inserts = [
        ":", "-", "[", "]", "{", "}", "&a ", "*a", "\n", "  ", "'", "\"", "#", "|", "0", "null",
        "true", "- x", "\t", "!!str ", "<<: ", "? ",
    ];
    for round in 0..600 {
        let mut text: Vec<char> = seeds[round % seeds.len()].chars().collect();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(text.len() + 1);
            match rng.below(3) {
                0 => {
                    let end = (at + rng.below(20)).min(text.len());
                    text.drain(at..end);
                }
                1 => {
                    let ins = inserts[rng.below(inserts.len())];
                    for (i, c) in ins.chars().enumerate() {
                        text.insert(at + i, c);
                    }
                }
                _ => {
                    // Duplicate a slice: repeats keys and blocks.
                    let end = (at + rng.below(80)).min(text.len());
                    let copy: Vec<char> = text[at..end].to_vec();
                    let to = rng.below(text.len() + 1);
                    for (i, c) in copy.into_iter().enumerate() {
                        text.insert(to + i, c);
                    }
                }
            }
        }
        check_never_panics(&text.into_iter().collect::<String>());
    }
}
