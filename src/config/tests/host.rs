//! Host mode and remediation (`clusters[].host`).

use super::*;

const HOST_FULL: &str = "\
host:
  log_dir_min_free_ratio: 0.1
  remediation_cooldown_secs: 600
  remediation_max_per_day: 2
  brokers:
    - id: 1
      process:
        systemd_unit: kafka.service
      log_dirs: [/var/lib/kafka/a, data/b]
      ports: [9092, \"127.0.0.11:9091\", \"[::1]:9093\"]
      remediation:
        enabled: true
        dry_run: true
        command: [systemctl, restart, kafka.service]
        before_command: [jcmd, \"{pid}\", Thread.print]
        zombie_for_secs: 60
        timeout_secs: 90
        before_timeout_secs: 20
    - id: 2
      process:
        cmdline_regex: 'kafka\\.Kafka .*/n2/'
    - id: 3
      process:
        pid_file: /run/kafka-3.pid
";

#[test]
fn host_mode_every_key() {
    let c = ok(&cluster_with(HOST_FULL));
    let h = c.clusters[0].host.as_ref().expect("host block");
    assert_eq!(h.log_dir_min_free_ratio, 0.1);
    assert_eq!(h.remediation_cooldown, Duration::from_secs(600));
    assert_eq!(h.remediation_max_per_day, 2);
    assert_eq!(h.brokers.len(), 3);
    let b1 = h.broker(1).unwrap();
    assert_eq!(
        b1.process,
        ProcessLocator::SystemdUnit("kafka.service".into())
    );
    assert_eq!(
        b1.log_dirs,
        vec![PathBuf::from("/var/lib/kafka/a"), PathBuf::from("data/b")]
    );
    let ports: Vec<String> = b1.ports.iter().map(|p| p.to_string()).collect();
    assert_eq!(ports, ["9092", "127.0.0.11:9091", "[::1]:9093"]);
    let r = b1.remediation.as_ref().unwrap();
    assert!(r.enabled && r.dry_run);
    assert_eq!(r.command, ["systemctl", "restart", "kafka.service"]);
    assert_eq!(
        r.before_command.as_deref(),
        Some(&["jcmd".to_string(), "{pid}".into(), "Thread.print".into()][..])
    );
    assert_eq!(r.zombie_for, Duration::from_secs(60));
    assert_eq!(r.timeout, Duration::from_secs(90));
    assert_eq!(r.before_timeout, Duration::from_secs(20));
    match &h.broker(2).unwrap().process {
        ProcessLocator::Cmdline { regex, source } => {
            assert_eq!(source, "kafka\\.Kafka .*/n2/");
            assert!(regex.is_match("java -cp x kafka.Kafka /tmp/kafka-lab/n2/server.properties"));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(
        h.broker(3).unwrap().process,
        ProcessLocator::PidFile("/run/kafka-3.pid".into())
    );
    assert!(h.broker(3).unwrap().remediation.is_none());
}

#[test]
fn host_mode_defaults() {
    assert!(
        ok(MINIMAL).clusters[0].host.is_none(),
        "off unless configured"
    );
    let c = ok(&cluster_with(
        "host:\n  brokers:\n    - id: 0\n      process: {pid_file: k.pid}\n      remediation:\n        command: [/bin/true]\n",
    ));
    let h = c.clusters[0].host.as_ref().unwrap();
    assert_eq!(h.log_dir_min_free_ratio, 0.05);
    assert_eq!(h.remediation_cooldown, Duration::from_secs(1800));
    assert_eq!(h.remediation_max_per_day, 3);
    let b = &h.brokers[0];
    assert!(b.log_dirs.is_empty() && b.ports.is_empty());
    let r = b.remediation.as_ref().unwrap();
    assert!(!r.enabled, "a remediation block does nothing until enabled");
    assert!(!r.dry_run);
    assert_eq!(r.before_command, None);
    assert_eq!(r.zombie_for, Duration::from_secs(120));
    assert_eq!(r.timeout, Duration::from_secs(300));
    assert_eq!(r.before_timeout, Duration::from_secs(60));
}

#[test]
fn host_mode_relative_paths_follow_the_file() {
    let dir = temp_dir();
    let file = dir.join("w.yaml");
    std::fs::write(
        &file,
        cluster_with("host:\n  brokers:\n    - id: 1\n      process: {pid_file: run/k.pid}\n      log_dirs: data\n"),
    )
    .unwrap();
    let c = load(&file).unwrap();
    let b = &c.clusters[0].host.as_ref().unwrap().brokers[0];
    assert_eq!(b.process, ProcessLocator::PidFile(dir.join("run/k.pid")));
    assert_eq!(b.log_dirs, vec![dir.join("data")]);
}

#[test]
fn host_mode_problems_with_positions() {
    let text = cluster_with(
        "\
host:
  log_dir_min_free_ratio: 0
  remediation_max_per_day: 0
  brokers:
    - id: 1
      process:
        systemd_unit: kafka.service
        pid_file: /run/k.pid
      ports: [0, 70000, \"localhost:9092\", x]
    - id: 1
      process: {cmdline_regex: '(unclosed'}
      remediation:
        command: \"systemctl restart kafka\"
        before_command: [jcmd, \"{PID}\", Thread.print]
        zombie_for_secs: 0
        restart: true
    - process: {}
      log_dirs: [\"\"]
      remediation:
        command: []
    - id: 4
      process: {systemd_unit: \"a/b\"}
      remediation:
        enabled: yes
        command: [\"\", x]
",
    );
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert_eq!(
        got,
        [
            "5:31: log_dir_min_free_ratio 0 is out of range (expected a number above 0 and at most 1)",
            "6:32: remediation_max_per_day 0 is out of range (expected an integer from 1 to 1000)",
            "11:13: systemd_unit and pid_file are both set in clusters[0].host.brokers[0].process (expected exactly one of systemd_unit, pid_file, cmdline_regex)",
            "12:19: '0' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "12:22: '70000' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "12:29: 'localhost:9092' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "12:47: 'x' is not a port (expected a port (9092) or address:port (127.0.0.1:9092, [::1]:9092))",
            "13:15: broker 1 is listed twice in host.brokers (first at line 8) (expected each broker once)",
            "14:36: invalid regex '(unclosed': unclosed group (expected a regular expression, searched in the process's command line)",
            "16:22: command must be a list of arguments, not the text 'systemctl restart kafka' (expected a list of arguments, program first, e.g. [systemctl, restart, kafka.service])",
            "17:36: unknown placeholder '{PID}' in before_command (expected one of {pid}, {broker}, {cluster})",
            "18:30: zombie_for_secs 0 is out of range (expected an integer from 1 to 86400)",
            "19:13: unknown key 'restart' in clusters[0].host.brokers[1].remediation (expected one of: enabled, dry_run, command, before_command, zombie_for_secs, timeout_secs, before_timeout_secs)",
            "20:11: missing required key 'id' in clusters[0].host.brokers[2] (expected the broker's node.id / broker.id)",
            "20:11: missing a way to find the process in clusters[0].host.brokers[2].process (expected exactly one of systemd_unit, pid_file, cmdline_regex)",
            "21:22: empty log directory path (expected a directory path)",
            "23:13: command is empty (expected a list of arguments, program first, e.g. [systemctl, restart, kafka.service])",
            "25:35: 'a/b' is not a systemd unit name (expected a unit name such as kafka.service)",
            "27:22: wrong type for enabled: the text 'yes' (expected true or false)",
            "28:23: command has an empty program name (expected a list of arguments, program first, e.g. [systemctl, restart, kafka.service])",
        ]
    );
}

#[test]
fn host_mode_needs_brokers_and_stays_out_of_defaults() {
    assert_eq!(
        one(&cluster_with("host:\n  log_dir_min_free_ratio: 0.2\n")),
        "5:7: missing required key 'brokers' in clusters[0].host (expected a list of the brokers on this host, each with id and process)"
    );
    assert_eq!(
        one(&cluster_with("host:\n  brokers: []\n")),
        "5:7: clusters[0].host.brokers is empty (expected at least one broker, or no host block)"
    );
    let text = format!("defaults:\n  host:\n    brokers: []\n{MINIMAL}");
    assert!(
        one(&text).starts_with("2:3: 'host' cannot be set in defaults, only in each cluster"),
        "{}",
        one(&text)
    );
}

#[test]
fn example_host_block_loads_uncommented() {
    let shipped = std::fs::read_to_string(example_path("example.yaml")).unwrap();
    let start = shipped
        .find("    # host:\n")
        .expect("the host block is shown");
    let end = start
        + shipped[start..]
            .find("\n\n")
            .expect("a blank line after the block");
    let block: String = shipped[start..end]
        .lines()
        .filter_map(|l| {
            let l = l.strip_prefix("    ")?;
            // Lines of the block start "# " at the block's indentation; explanations
            // nested as "# #" or "#   #" stay comments.
            let l = l.strip_prefix("# ")?;
            (!l.trim_start().starts_with('#')).then(|| format!("    {l}\n"))
        })
        .filter(|l| {
            l.trim_start()
                .starts_with(|c: char| c.is_ascii_alphabetic() || c == '-')
        })
        .collect();
    let c = ok(&format!("{MINIMAL}{block}"));
    let h = c.clusters[0].host.as_ref().expect("host");
    assert_eq!(h.log_dir_min_free_ratio, 0.05);
    assert_eq!(h.remediation_cooldown, Duration::from_secs(1800));
    let b = &h.brokers[0];
    assert_eq!(
        b.process,
        ProcessLocator::SystemdUnit("kafka.service".into())
    );
    assert_eq!(b.ports.len(), 2);
    let r = b.remediation.as_ref().unwrap();
    assert!(!r.enabled && r.dry_run);
    assert_eq!(r.before_command.as_ref().unwrap()[1], "{pid}");
}

/// A `log_dirs` that is no list still leaves the broker's other keys checked: every
/// mistake at once (the reader returned from the broker at it, and the bad port and the
/// unknown key below it waited for the next try).
#[test]
fn a_broken_log_dirs_still_reports_the_brokers_other_problems() {
    let text = cluster_with(
        "\
host:
  brokers:
    - id: 1
      process: {pid_file: /run/k.pid}
      log_dirs: {a: b}
      ports: [x]
      restart: true
",
    );
    let got: Vec<String> = problems(&text).iter().map(short).collect();
    assert_eq!(got.len(), 3, "{got:#?}");
    assert!(got[0].contains("log_dirs"), "{got:#?}");
    assert!(got[1].contains("'x' is not a port"), "{got:#?}");
    assert!(got[2].contains("unknown key 'restart'"), "{got:#?}");
}
