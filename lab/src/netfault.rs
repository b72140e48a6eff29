//! Network faults with iptables, scoped to one chain of the lab's own so that nothing
//! outside the lab is touched and teardown is a flush.
//!
//! On loopback every connection comes from 127.0.0.1, so a rule cannot pick the source
//! broker by address; each node runs as its own Unix user and rules match the packet's
//! owner (`-m owner --uid-owner`) in OUTPUT, which loopback traffic traverses.
//!
//! A packet dropped in OUTPUT is a send that failed to its own TCP, which tries again
//! without counting a retransmission; one dropped as it arrives (INPUT, the lab's second
//! chain) was sent as far as its TCP knows, and is lost on the way as on a real network.
//! `cage` uses that one.

use crate::error::LabError;
use crate::sys::run;

pub const CHAIN: &str = "KAFKA-LAB";
/// The lab's chain for packets as they arrive (INPUT), created only when used.
pub const CHAIN_IN: &str = "KAFKA-LAB-IN";

fn ipt(args: &[&str]) -> Result<String, LabError> {
    let mut all = vec!["-w", "5"];
    all.extend_from_slice(args);
    run("iptables", &all)
}

pub fn ensure_chain() -> Result<(), LabError> {
    if ipt(&["-S", CHAIN]).is_err() {
        ipt(&["-N", CHAIN])?;
    }
    if ipt(&["-C", "OUTPUT", "-j", CHAIN]).is_err() {
        ipt(&["-I", "OUTPUT", "1", "-j", CHAIN])?;
    }
    Ok(())
}

/// The INPUT chain, for losses on the way (see the module's doc).
pub fn ensure_in_chain() -> Result<(), LabError> {
    if ipt(&["-S", CHAIN_IN]).is_err() {
        ipt(&["-N", CHAIN_IN])?;
    }
    if ipt(&["-C", "INPUT", "-j", CHAIN_IN]).is_err() {
        ipt(&["-I", "INPUT", "1", "-j", CHAIN_IN])?;
    }
    Ok(())
}

/// Adds a rule (`args` after `-A <chain>`) to one of the lab's chains.
pub fn append(chain: &str, args: &[&str]) -> Result<(), LabError> {
    let mut all = vec!["-A", chain];
    all.extend_from_slice(args);
    ipt(&all).map(|_| ())
}

/// A packet match the lab drops. Every rule carries a comment naming the node and fault,
/// which is how `heal N` finds the rules of one node.
#[derive(Debug, Clone)]
pub struct DropRule {
    /// Only packets sent by this user's sockets.
    pub uid: Option<u32>,
    pub dest: Option<String>,
    pub dport: u16,
}

fn comment(node: i32, fault: &str) -> String {
    format!("kafka-lab:n{node}:{fault}")
}

pub fn add(node: i32, fault: &str, rules: &[DropRule]) -> Result<(), LabError> {
    ensure_chain()?;
    for r in rules {
        let uid = r.uid.map(|u| u.to_string());
        let dport = r.dport.to_string();
        let tag = comment(node, fault);
        let mut args: Vec<&str> = vec!["-A", CHAIN, "-p", "tcp"];
        if let Some(u) = &uid {
            args.extend_from_slice(&["-m", "owner", "--uid-owner", u]);
        }
        if let Some(d) = &r.dest {
            args.extend_from_slice(&["-d", d]);
        }
        args.extend_from_slice(&["--dport", &dport, "-m", "comment", "--comment", &tag]);
        // DROP, not REJECT: a real partition stalls connections instead of resetting them.
        args.extend_from_slice(&["-j", "DROP"]);
        ipt(&args)?;
    }
    Ok(())
}

/// Removes the rules of one node, or of every node when `node` is None.
pub fn remove(node: Option<i32>) -> Result<(), LabError> {
    if ipt(&["-S", CHAIN]).is_err() {
        return Ok(());
    }
    let Some(node) = node else {
        ipt(&["-F", CHAIN])?;
        if ipt(&["-S", CHAIN_IN]).is_ok() {
            ipt(&["-F", CHAIN_IN])?;
        }
        return Ok(());
    };
    remove_tagged(&format!("kafka-lab:n{node}:"))
}

/// Removes the rules whose comment starts with `prefix`, in both of the lab's chains.
pub fn remove_tagged(prefix: &str) -> Result<(), LabError> {
    for chain in [CHAIN, CHAIN_IN] {
        remove_tagged_in(chain, prefix)?;
    }
    Ok(())
}

fn remove_tagged_in(chain: &str, prefix: &str) -> Result<(), LabError> {
    if ipt(&["-S", chain]).is_err() {
        return Ok(());
    }
    // Delete by rule number, highest first, so earlier numbers stay valid.
    let listing = ipt(&["-L", chain, "-n", "--line-numbers"])?;
    let mut numbers: Vec<u32> = listing
        .lines()
        .filter(|l| l.contains(prefix))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect();
    numbers.sort_unstable_by(|a, b| b.cmp(a));
    for n in numbers {
        ipt(&["-D", chain, &n.to_string()])?;
    }
    Ok(())
}

/// Removes the chains and the jumps to them.
pub fn teardown() -> Result<(), LabError> {
    for (hook, chain) in [("OUTPUT", CHAIN), ("INPUT", CHAIN_IN)] {
        while ipt(&["-C", hook, "-j", chain]).is_ok() {
            ipt(&["-D", hook, "-j", chain])?;
        }
        if ipt(&["-S", chain]).is_ok() {
            ipt(&["-F", chain])?;
            ipt(&["-X", chain])?;
        }
    }
    Ok(())
}

/// Rules currently installed, one line each (for `status` and the cleanup test).
pub fn list() -> Vec<String> {
    [CHAIN, CHAIN_IN]
        .iter()
        .flat_map(|c| {
            ipt(&["-S", c])
                .map(|s| {
                    s.lines()
                        .filter(|l| l.starts_with("-A"))
                        .map(str::to_owned)
                        .collect::<Vec<_>>()
                })
                .unwrap_or_default()
        })
        .collect()
}

/// True when iptables has a chain or jump of the lab's.
pub fn present() -> bool {
    ipt(&["-S", CHAIN]).is_ok() || ipt(&["-S", CHAIN_IN]).is_ok()
}
