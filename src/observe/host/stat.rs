//! `/proc/<pid>/stat` and `/proc/<pid>/task/<tid>/stat`, parsed. Pure: the text comes in,
//! the fields the watchdog uses come out, so every shape the kernel writes can be tested
//! with a fixture string.

use super::ParseError;

pub use crate::model::round::ProcessState;

/// The fields of `stat` the watchdog reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcStat {
    pub pid: u32,
    /// The command name (at most 15 bytes, may hold spaces and parentheses).
    pub comm: String,
    pub state: ProcessState,
    /// User and system CPU time, in clock ticks.
    pub utime_ticks: u64,
    pub stime_ticks: u64,
    pub num_threads: u32,
    /// Start time after boot, in clock ticks: with the pid, it names one process even when
    /// the pid is reused.
    pub start_ticks: u64,
}

/// Parses one `stat` line. The command name sits in parentheses and may itself contain
/// spaces and ')', so the fields after it are found from the last ')'.
pub fn parse_stat(text: &str) -> Result<ProcStat, ParseError> {
    let bad = |why: &str| ParseError::new("stat", why);
    let open = text
        .find('(')
        .ok_or_else(|| bad("no '(' before the command name"))?;
    let close = text
        .rfind(')')
        .ok_or_else(|| bad("no ')' after the command name"))?;
    if close < open {
        return Err(bad("')' before '('"));
    }
    let pid = text[..open]
        .trim()
        .parse::<u32>()
        .map_err(|_| bad("the pid is not a number"))?;
    let comm = text[open + 1..close].to_string();
    // Fields from the third (state) on; index 0 here is field 3 of proc(5).
    let rest: Vec<&str> = text[close + 1..].split_whitespace().collect();
    let field = |n: usize| -> Result<&str, ParseError> {
        rest.get(n - 3)
            .copied()
            .ok_or_else(|| bad(&format!("field {n} is missing")))
    };
    let number = |n: usize| -> Result<u64, ParseError> {
        field(n)?
            .parse::<u64>()
            .map_err(|_| bad(&format!("field {n} is not a number")))
    };
    let state = field(3)?
        .chars()
        .next()
        .map(ProcessState::from_code)
        .ok_or_else(|| bad("empty state"))?;
    Ok(ProcStat {
        pid,
        comm,
        state,
        utime_ticks: number(14)?,
        stime_ticks: number(15)?,
        num_threads: u32::try_from(number(20)?).map_err(|_| bad("thread count too large"))?,
        start_ticks: number(22)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real line of a Kafka broker's JVM (trimmed of nothing), stopped with SIGSTOP.
    const JAVA_STOPPED: &str = "4711 (java) T 1 4711 4711 0 -1 4194560 95443 0 12 0 2150 731 0 0 20 0 74 0 1234567 3517566976 98765 18446744073709551615 1 1 0 0 0 0 0 2 16800975 0 0 0 17 1 0 0 0 0 0 0 0 0 0 0 0 0 0\n";

    #[test]
    fn a_stopped_jvm() {
        let s = parse_stat(JAVA_STOPPED).unwrap();
        assert_eq!(s.pid, 4711);
        assert_eq!(s.comm, "java");
        assert_eq!(s.state, ProcessState::Stopped);
        assert_eq!((s.utime_ticks, s.stime_ticks), (2150, 731));
        assert_eq!(s.num_threads, 74);
        assert_eq!(s.start_ticks, 1234567);
        assert!(s.state.is_stopped());
    }

    #[test]
    fn command_names_with_spaces_and_parentheses() {
        let line = JAVA_STOPPED.replace("(java) T", "(a) b (c)) D");
        let s = parse_stat(&line).unwrap();
        assert_eq!(s.comm, "a) b (c)");
        assert_eq!(s.state, ProcessState::DiskSleep);
        assert_eq!(s.num_threads, 74);
    }

    #[test]
    fn every_state_code() {
        for (code, state) in [
            ('R', ProcessState::Running),
            ('S', ProcessState::Sleeping),
            ('D', ProcessState::DiskSleep),
            ('T', ProcessState::Stopped),
            ('t', ProcessState::Traced),
            ('Z', ProcessState::Zombie),
            ('X', ProcessState::Dead),
            ('I', ProcessState::Idle),
            ('W', ProcessState::Other),
        ] {
            let line = JAVA_STOPPED.replace("(java) T", &format!("(java) {code}"));
            assert_eq!(parse_stat(&line).unwrap().state, state, "{code}");
        }
        assert!(ProcessState::Zombie.has_exited());
        assert!(!ProcessState::DiskSleep.has_exited());
        let labels: std::collections::BTreeSet<_> =
            ProcessState::ALL.iter().map(|s| s.as_label()).collect();
        assert_eq!(labels.len(), ProcessState::ALL.len(), "labels are distinct");
    }

    #[test]
    fn truncated_and_garbled_lines_are_errors_not_panics() {
        for bad in [
            "",
            "4711",
            "4711 (java",
            "4711 java) S 1",
            ") (",
            "x (java) S 1 2 3",
            "4711 (java) S 1 2 3",
            "4711 (java)",
            "4711 (java) S 1 4711 4711 0 -1 4194560 95443 0 12 0 abc 731 0 0 20 0 74 0 1",
        ] {
            assert!(parse_stat(bad).is_err(), "{bad:?} must not parse");
        }
    }
}
