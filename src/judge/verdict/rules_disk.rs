//! Rules on the broker's log directories as it describes them (DescribeLogDirs): a
//! directory Kafka took offline (a failed or full disk: with more than one directory the
//! broker stays up and stops serving the partitions there), and one whose free space runs
//! out at its recent pace.

use std::collections::{BTreeMap, VecDeque};
use std::time::{Duration, SystemTime};

use super::facts::BrokerFacts;
use super::{hit, BrokerMemory, RuleHit, VerdictSettings};
use crate::judge::rule::{BrokerState, Rule};
use crate::model::round::{BrokerId, RoundObservation};

const KAFKA_STORAGE_ERROR: i16 = 56;

/// How far back a directory's usable bytes are kept for its forecast.
pub(super) const USAGE_WINDOW: Duration = Duration::from_secs(30 * 60);
/// A forecast needs this much history: a burst of minutes (a build, a reassignment's copy
/// on a shared disk) says nothing of hours.
const FORECAST_MIN_SPAN: Duration = Duration::from_secs(600);
/// Usable bytes of one directory over the last `USAGE_WINDOW`.
pub type Usage = VecDeque<(SystemTime, u64)>;

/// When the directory fills at the pace between its oldest and newest sample; `None`
/// when it does not shrink, or the history is too short.
pub fn time_to_full(usage: &Usage) -> Option<Duration> {
    let (t0, u0) = *usage.front()?;
    let (t1, u1) = *usage.back()?;
    let span = t1.duration_since(t0).ok()?;
    if span < FORECAST_MIN_SPAN || u1 >= u0 {
        return None;
    }
    let per_sec = (u0 - u1) as f64 / span.as_secs_f64();
    Some(Duration::from_secs_f64(u1 as f64 / per_sec))
}

pub(super) fn log_dir_failed(f: &BrokerFacts, _: &VerdictSettings) -> Option<RuleHit> {
    let dirs = f.log_dirs?;
    let failed: Vec<String> = dirs
        .iter()
        .filter(|d| d.error_code != 0)
        .map(|d| {
            if d.error_code == KAFKA_STORAGE_ERROR {
                format!("{} (KAFKA_STORAGE_ERROR)", d.dir)
            } else {
                format!(
                    "{} ({})",
                    d.dir,
                    crate::observe::wire::kafka_error_name(d.error_code)
                )
            }
        })
        .collect();
    if failed.is_empty() {
        return None;
    }
    let offline = if f.offline_replica_of.is_empty() {
        String::new()
    } else {
        format!(
            "; {} partition(s) name it an offline replica: {}{}",
            f.offline_replica_of.len(),
            f.offline_replica_of.shown.join(", "),
            if f.offline_replica_of.len() > f.offline_replica_of.shown.len() {
                ", ..."
            } else {
                ""
            }
        )
    };
    hit(
        Rule::LogDirFailed,
        BrokerState::Degraded,
        format!(
            "log director{} offline: {} of its {} directories; it still serves the partitions on the others, and none of those on the failed one until it is replaced and the broker restarted{offline}",
            if failed.len() == 1 { "y" } else { "ies" },
            failed.join(", "),
            dirs.len()
        ),
    )
}

pub(super) fn log_dir_filling(f: &BrokerFacts, s: &VerdictSettings) -> Option<RuleHit> {
    let dirs = f.log_dirs?;
    let filling: Vec<String> = dirs
        .iter()
        .filter(|d| d.error_code == 0)
        .filter_map(|d| {
            let (total, usable) = (d.total_bytes?, d.usable_bytes?);
            let ratio = usable as f64 / total.max(1) as f64;
            let forecast = f
                .dir_usage
                .and_then(|u| u.get(&d.dir))
                .and_then(time_to_full);
            let low = ratio < s.log_dir_min_free_ratio;
            let soon = forecast.is_some_and(|t| t < s.log_dir_full_within);
            (low || soon).then(|| {
                format!(
                    "{}: {} free of {} ({:.1}%){}",
                    d.dir,
                    crate::model::words::human_bytes(usable),
                    crate::model::words::human_bytes(total),
                    ratio * 100.0,
                    forecast
                        .map(|t| format!(
                            ", full in about {:.1} h at its pace of the last {} min",
                            t.as_secs_f64() / 3600.0,
                            USAGE_WINDOW.as_secs() / 60
                        ))
                        .unwrap_or_default()
                )
            })
        })
        .collect();
    if filling.is_empty() {
        return None;
    }
    hit(
        Rule::LogDirFilling,
        BrokerState::Degraded,
        format!(
            "log directory space runs out (below {}% free{}): {}; a full directory goes offline with its partitions",
            percent(s.log_dir_min_free_ratio),
            if s.log_dir_full_within.is_zero() {
                String::new()
            } else {
                format!(", or full within {}", hours(s.log_dir_full_within))
            },
            filling.join("; ")
        ),
    )
}

/// "5" for 0.05, "2.5" for 0.025.
fn percent(ratio: f64) -> String {
    let p = ratio * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{:.0}", p)
    } else {
        format!("{p:.1}")
    }
}

/// "6 h", or "90 min" when it is not whole hours.
fn hours(d: Duration) -> String {
    let s = d.as_secs();
    if s % 3600 == 0 {
        format!("{} h", s / 3600)
    } else {
        format!("{} min", s.div_ceil(60))
    }
}

/// Keeps each answering broker's directories' usable bytes for the forecast.
pub(super) fn remember_usage(
    memory: &mut BTreeMap<BrokerId, BrokerMemory>,
    obs: &RoundObservation,
    now: SystemTime,
) {
    for (id, p) in &obs.probes {
        let Some(Ok(dirs)) = &p.log_dirs else {
            continue;
        };
        let m = memory.entry(*id).or_default();
        m.dir_usage
            .retain(|dir, _| dirs.iter().any(|d| &d.dir == dir));
        for d in dirs {
            let Some(usable) = d.usable_bytes.filter(|_| d.error_code == 0) else {
                m.dir_usage.remove(&d.dir);
                continue;
            };
            let u = m.dir_usage.entry(d.dir.clone()).or_default();
            u.push_back((now, usable));
            while u
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t).unwrap_or_default() > USAGE_WINDOW)
            {
                u.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::UNIX_EPOCH;

    fn t(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(1_800_000_000 + s)
    }

    #[test]
    fn the_forecast_is_the_recent_pace() {
        let gib = 1u64 << 30;
        // 10 GiB free, losing 1 GiB every 10 min: 100 min left.
        let u: Usage = [(t(0), 11 * gib), (t(600), 10 * gib)].into();
        let left = time_to_full(&u).unwrap();
        assert!((left.as_secs_f64() - 6000.0).abs() < 1.0, "{left:?}");
        // Shrinking for too short a time, or growing: no forecast.
        assert_eq!(
            time_to_full(&[(t(0), 11 * gib), (t(60), 10 * gib)].into()),
            None
        );
        assert_eq!(
            time_to_full(&[(t(0), 10 * gib), (t(600), 11 * gib)].into()),
            None
        );
        assert_eq!(time_to_full(&Usage::new()), None);
    }
}
