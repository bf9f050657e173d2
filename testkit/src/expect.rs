//! Scenario `expect` assertions, evaluated at the end of a run.

use nodewright_core::model::duration::format_duration_ms;

use crate::report::{ExpectationResult, Report};
use crate::scenario::Expectation;

/// (pod, created, bound, deleted) in milliseconds.
pub type PodTimes = (String, u64, Option<u64>, Option<u64>);

/// `breaches`: the pods whose placement breaks their constraints at the end
/// ([`crate::sim::cluster::SimCluster::placement_breaches`]).
pub fn evaluate(
    expectations: &[Expectation],
    report: &Report,
    pods: &[PodTimes],
    breaches: &[String],
    end_ms: u64,
) -> Vec<ExpectationResult> {
    expectations
        .iter()
        .map(|e| match e {
            Expectation::PodsScheduledWithin(limit) => {
                let reported: Vec<&str> = report
                    .unschedulable
                    .iter()
                    .filter(|u| !u.reason.starts_with("still waiting"))
                    .map(|u| u.pod.as_str())
                    .collect();
                let late: Vec<String> = pods
                    .iter()
                    .filter(|(name, _, _, _)| !reported.contains(&name.as_str()))
                    .filter_map(|(name, created, bound, deleted)| {
                        let waited = match bound {
                            Some(b) => b - created,
                            None => deleted.unwrap_or(end_ms) - created,
                        };
                        (waited > *limit)
                            .then(|| format!("{name} waited {}", format_duration_ms(waited)))
                    })
                    .collect();
                ExpectationResult {
                    name: format!("podsScheduledWithin {}", format_duration_ms(*limit)),
                    passed: late.is_empty(),
                    detail: if late.is_empty() {
                        format!("slowest pod waited {:.1}s", report.pods.pending_seconds.max)
                    } else {
                        late.join("; ")
                    },
                }
            }
            Expectation::MaxNodes(n) => ExpectationResult {
                name: format!("maxNodes {n}"),
                passed: report.nodes.peak <= *n as u64,
                detail: format!("peak {}", report.nodes.peak),
            },
            Expectation::FinalNodes(n) => ExpectationResult {
                name: format!("finalNodes {n}"),
                passed: report.nodes.final_count == *n as u64,
                detail: format!("final {}", report.nodes.final_count),
            },
            Expectation::MaxCostPerHour(c) => ExpectationResult {
                name: format!("maxCostPerHour {c}"),
                passed: report.cost.peak_usd_per_hour <= *c + 1e-9,
                detail: format!("peak ${:.4}/h", report.cost.peak_usd_per_hour),
            },
            Expectation::MaxDisruptions(n) => {
                let d = &report.disruptions;
                let voluntary = d.empty + d.underutilized + d.drifted;
                ExpectationResult {
                    name: format!("maxDisruptions {n}"),
                    passed: voluntary <= *n as u64,
                    detail: format!("{voluntary} voluntary disruptions"),
                }
            }
            Expectation::Unschedulable(expected) => {
                let missing: Vec<&String> = expected
                    .iter()
                    .filter(|p| !report.unschedulable.iter().any(|u| &u.pod == *p))
                    .collect();
                ExpectationResult {
                    name: format!("unschedulable {}", expected.join(",")),
                    passed: missing.is_empty(),
                    detail: if missing.is_empty() {
                        "every listed pod is reported unschedulable with a reason".to_string()
                    } else {
                        format!("not reported unschedulable: {missing:?}")
                    },
                }
            }
            Expectation::PlacementHonoured => ExpectationResult {
                name: "placementHonoursConstraints".to_string(),
                passed: breaches.is_empty(),
                detail: if breaches.is_empty() {
                    "every spread and anti-affinity holds where the pods landed".to_string()
                } else {
                    format!("broken by {}", breaches.join("; "))
                },
            },
        })
        .collect()
}
