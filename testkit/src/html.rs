//! The report as one self-contained HTML page (`simulate --html F.html`): the figures, plots of
//! machines, cost per hour, pending pods and utilisation over time (inline SVG, no script, no
//! network), and the table of decisions: every machine, why it was launched and why it went.

use std::fmt::Write;

use crate::report::{Report, Series};

/// Escapes text for HTML content and attribute values.
fn esc(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A time in seconds as a reader wants it on an axis.
fn clock(seconds: f64) -> String {
    if seconds >= 2.0 * 86_400.0 {
        format!("{:.1} d", seconds / 86_400.0)
    } else if seconds >= 2.0 * 3_600.0 {
        format!("{:.1} h", seconds / 3_600.0)
    } else if seconds >= 120.0 {
        format!("{:.0} min", seconds / 60.0)
    } else {
        format!("{seconds:.0} s")
    }
}

/// One line of a chart.
struct Line<'a> {
    label: &'a str,
    values: &'a [f64],
    color: &'a str,
}

const WIDTH: f64 = 760.0;
const HEIGHT: f64 = 190.0;
const LEFT: f64 = 64.0;
const RIGHT: f64 = 16.0;
const TOP: f64 = 14.0;
const BOTTOM: f64 = 28.0;

/// A step chart of `lines` over the run, the y axis from 0 to the largest value.
fn chart(
    out: &mut String,
    title: &str,
    step_seconds: f64,
    lines: &[Line],
    unit: fn(f64) -> String,
) {
    let points = lines.iter().map(|l| l.values.len()).max().unwrap_or(0);
    let top = lines
        .iter()
        .flat_map(|l| l.values.iter().copied())
        .fold(0.0f64, f64::max);
    let y_max = if top > 0.0 { top } else { 1.0 };
    let plot_w = WIDTH - LEFT - RIGHT;
    let plot_h = HEIGHT - TOP - BOTTOM;
    let x = |i: usize| LEFT + plot_w * i as f64 / points.max(1) as f64;
    let y = |v: f64| TOP + plot_h * (1.0 - v / y_max);
    let _ = write!(
        out,
        "<figure><figcaption>{}</figcaption><svg viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"{}\">",
        esc(title),
        esc(title)
    );
    // Axes, grid and labels.
    for k in 0..=2 {
        let v = y_max * k as f64 / 2.0;
        let _ = write!(
            out,
            "<line class=\"grid\" x1=\"{LEFT}\" x2=\"{}\" y1=\"{:.1}\" y2=\"{:.1}\"/><text class=\"ylabel\" x=\"{}\" y=\"{:.1}\">{}</text>",
            WIDTH - RIGHT,
            y(v),
            y(v),
            LEFT - 6.0,
            y(v) + 4.0,
            esc(&unit(v))
        );
    }
    let duration = step_seconds * points as f64;
    for k in 0..=4 {
        let at = duration * k as f64 / 4.0;
        let _ = write!(
            out,
            "<text class=\"xlabel\" x=\"{:.1}\" y=\"{}\">{}</text>",
            LEFT + plot_w * k as f64 / 4.0,
            HEIGHT - 8.0,
            esc(&clock(at))
        );
    }
    for line in lines {
        let mut path = String::new();
        for (i, v) in line.values.iter().enumerate() {
            let _ = write!(
                path,
                "{}{:.1},{:.1} {:.1},{:.1}",
                if i == 0 { "" } else { " " },
                x(i),
                y(*v),
                x(i + 1),
                y(*v)
            );
        }
        let _ = write!(
            out,
            "<polyline fill=\"none\" stroke=\"{}\" stroke-width=\"1.6\" points=\"{path}\"><title>{}</title></polyline>",
            line.color,
            esc(line.label)
        );
    }
    out.push_str("</svg>");
    if lines.len() > 1 {
        out.push_str("<p class=\"legend\">");
        for line in lines {
            let _ = write!(
                out,
                "<span style=\"color:{}\">&#9632;</span> {} ",
                line.color,
                esc(line.label)
            );
        }
        out.push_str("</p>");
    }
    out.push_str("</figure>\n");
}

fn count(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

fn dollars(v: f64) -> String {
    format!("${v:.2}/h")
}

/// The cost above the lower bound, by cause.
fn cost_split(out: &mut String, report: &Report) {
    if report.cost.lower_bound_usd <= 0.0 {
        return;
    }
    let c = &report.cost.above_bound;
    let _ = writeln!(
        out,
        "<h2>Cost above the lower bound: ${:.4}</h2>\n<table><tr><th>cause</th><th>USD</th><th>share</th><th>what it is</th></tr>",
        c.above_bound_usd
    );
    let rows = [
        (
            "booting",
            c.booting_usd,
            "machines launched, not yet taking pods (booting, registering, held for their siblings)",
        ),
        (
            "idle",
            c.idle_usd,
            "machines up without a workload pod (waiting for consolidateAfter, or for pods that went elsewhere)",
        ),
        (
            "fragmentation",
            c.fragmentation_usd,
            "CPU, memory or GPUs left free on machines carrying pods (by their fullest resource)",
        ),
        (
            "offering premium",
            c.premium_usd,
            "the chosen offerings over the cheapest that fit each launch",
        ),
        (
            "work done again",
            c.redone_usd,
            "Jobs' pods evicted before their end: the Job runs each again, and the bound counts only the run that ended",
        ),
        (
            "other",
            c.other_usd,
            "the pods' own capacity at the cheapest offering, above the bound's fractional price",
        ),
    ];
    for (name, usd, what) in rows {
        let share = if c.above_bound_usd > 0.0 {
            percent(usd / c.above_bound_usd)
        } else {
            "-".to_string()
        };
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>${usd:.4}</td><td>{}</td><td>{}</td></tr>",
            esc(name),
            esc(&share),
            esc(what)
        );
    }
    out.push_str("</table>\n");
    let _ = writeln!(
        out,
        "<p>Pods later evicted ran on ${:.4} of capacity (work lost when they restart; beyond the Jobs' share above, the bound counts it as useful: a Deployment's pod served while it ran).</p>",
        c.evicted_usd
    );
}

fn percent(v: f64) -> String {
    format!("{:.0}%", v * 100.0)
}

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:1100px;color:#1d2330;padding:0 16px}\
h1{font-size:22px}h2{font-size:17px;margin-top:28px}\
table{border-collapse:collapse;width:100%;font-size:12.5px}th,td{border-bottom:1px solid #dde1e8;padding:4px 6px;text-align:left;vertical-align:top}\
th{background:#f3f5f8}td.num{text-align:right;white-space:nowrap}\
.facts{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:8px}\
.fact{background:#f3f5f8;border-radius:6px;padding:8px 10px}.fact b{display:block;font-size:18px}\
figure{margin:16px 0}figcaption{font-weight:600}svg{width:100%;max-width:760px;height:auto}\
.grid{stroke:#e3e6eb}.ylabel{font-size:11px;text-anchor:end;fill:#555}.xlabel{font-size:11px;text-anchor:middle;fill:#555}\
.legend{margin:2px 0 0 64px;font-size:12px}.bad{color:#b3261e;font-weight:600}.ok{color:#1b7f3b}\
details summary{cursor:pointer}";

/// The page.
pub fn render(report: &Report) -> String {
    let mut out = String::new();
    let title = format!("nodewright: {} (seed {})", report.scenario, report.seed);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title><style>{STYLE}</style></head><body>\n<h1>{}</h1>\n",
        esc(&title),
        esc(&title)
    );
    let verdict = if report.passed() {
        "<span class=\"ok\">every invariant held, every expectation passed</span>".to_string()
    } else {
        format!(
            "<span class=\"bad\">{} invariant violation(s), {} failed expectation(s)</span>",
            report.invariant_violations.len(),
            report.expectations.iter().filter(|e| !e.passed).count()
        )
    };
    let _ = writeln!(
        out,
        "<p>{} simulated, {} events, {} commands; {verdict}. Decision digest <code>{}</code>.</p>",
        esc(&clock(report.duration_seconds)),
        report.events,
        report.commands,
        esc(&report.decision_digest)
    );
    let ratio = if report.cost.lower_bound_usd > 0.0 {
        format!(
            "{:.2}× the lower bound (${:.4})",
            report.cost.total_usd / report.cost.lower_bound_usd,
            report.cost.lower_bound_usd
        )
    } else {
        "no lower bound".to_string()
    };
    let facts = [
        (
            "cost".to_string(),
            format!("${:.4}", report.cost.total_usd),
            ratio,
        ),
        (
            "machines".to_string(),
            format!("{} launched", report.nodes.launched),
            format!(
                "peak {}, {} at the end, {} terminated",
                report.nodes.peak, report.nodes.final_count, report.nodes.terminated
            ),
        ),
        (
            "pods".to_string(),
            format!(
                "{} of {} scheduled",
                report.pods.scheduled, report.pods.total
            ),
            format!(
                "pending p50 {:.1} s, p99 {:.1} s, max {:.1} s",
                report.pods.pending_seconds.p50,
                report.pods.pending_seconds.p99,
                report.pods.pending_seconds.max
            ),
        ),
        (
            "utilisation".to_string(),
            format!("CPU {}", percent(report.utilization.cpu_mean)),
            format!("memory {}", percent(report.utilization.memory_mean)),
        ),
        (
            "disruptions".to_string(),
            format!("{} evictions", report.disruptions.evictions),
            format!(
                "empty {}, underutilized {}, drifted {}, expired {}, interrupted {}",
                report.disruptions.empty,
                report.disruptions.underutilized,
                report.disruptions.drifted,
                report.disruptions.expired,
                report.disruptions.interrupted
            ),
        ),
    ];
    out.push_str("<div class=\"facts\">");
    for (name, big, small) in facts {
        let _ = write!(
            out,
            "<div class=\"fact\">{}<b>{}</b>{}</div>",
            esc(&name),
            esc(&big),
            esc(&small)
        );
    }
    out.push_str("</div>\n");
    cost_split(&mut out, report);

    let s: &Series = &report.series;
    out.push_str("<h2>Over time</h2>\n");
    chart(
        &mut out,
        "Machines running",
        s.step_seconds,
        &[Line {
            label: "machines",
            values: &s.machines,
            color: "#2458a6",
        }],
        count,
    );
    chart(
        &mut out,
        "Cost per hour",
        s.step_seconds,
        &[Line {
            label: "USD per hour",
            values: &s.usd_per_hour,
            color: "#8a4b08",
        }],
        dollars,
    );
    chart(
        &mut out,
        "Pending pods",
        s.step_seconds,
        &[Line {
            label: "pending pods",
            values: &s.pending_pods,
            color: "#b3261e",
        }],
        count,
    );
    chart(
        &mut out,
        "Utilisation (requests over allocatable on nodewright's nodes)",
        s.step_seconds,
        &[
            Line {
                label: "CPU",
                values: &s.cpu_utilization,
                color: "#1b7f3b",
            },
            Line {
                label: "memory",
                values: &s.memory_utilization,
                color: "#6a3fb5",
            },
        ],
        percent,
    );

    if !report.invariant_violations.is_empty() || !report.expectations.is_empty() {
        out.push_str("<h2>Checks</h2>\n<table><tr><th>check</th><th>at</th><th>result</th><th>detail</th></tr>\n");
        for v in &report.invariant_violations {
            let _ = writeln!(
                out,
                "<tr><td>invariant {}</td><td class=\"num\">{:.1} s (event {})</td><td class=\"bad\">broken</td><td>{}</td></tr>",
                esc(&v.kind),
                v.at_seconds,
                v.event,
                esc(&v.detail)
            );
        }
        for e in &report.expectations {
            let (class, word) = if e.passed {
                ("ok", "passed")
            } else {
                ("bad", "failed")
            };
            let _ = writeln!(
                out,
                "<tr><td>expect {}</td><td></td><td class=\"{class}\">{word}</td><td>{}</td></tr>",
                esc(&e.name),
                esc(&e.detail)
            );
        }
        out.push_str("</table>\n");
    }

    let mut machines: Vec<_> = report.machines.iter().collect();
    machines.sort_by(|a, b| {
        a.launched_at_seconds
            .total_cmp(&b.launched_at_seconds)
            .then_with(|| a.name.cmp(&b.name))
    });
    let _ = write!(
        out,
        "<h2>Decisions: {} machines</h2>\n<table><tr><th>machine</th><th>NodePool</th><th>type</th><th>zone</th><th>capacity</th><th>price</th><th>launched</th><th>why</th><th>removed</th><th>why</th></tr>\n",
        machines.len()
    );
    for m in machines {
        let removed = m
            .terminated_at_seconds
            .map(|t| format!("{t:.1} s"))
            .unwrap_or_else(|| "running".into());
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">${:.4}/h</td><td class=\"num\">{:.1} s</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
            esc(&m.name),
            esc(&m.nodepool),
            esc(&m.instance_type),
            esc(&m.zone),
            esc(&m.capacity_type),
            m.price_usd_per_hour,
            m.launched_at_seconds,
            esc(&m.launch_reason),
            esc(&removed),
            esc(m.termination_reason.as_deref().unwrap_or(""))
        );
    }
    out.push_str("</table>\n");

    if !report.unschedulable.is_empty() {
        let _ = write!(
            out,
            "<h2>Still pending at the end: {} pods</h2>\n<table><tr><th>pod</th><th>why</th></tr>\n",
            report.unschedulable.len()
        );
        for u in &report.unschedulable {
            let _ = writeln!(
                out,
                "<tr><td>{}</td><td>{}</td></tr>",
                esc(&u.pod),
                esc(&u.reason)
            );
        }
        out.push_str("</table>\n");
    }
    out.push_str("</body></html>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_escaped() {
        assert_eq!(
            esc("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
    }

    #[test]
    fn times_read_in_the_unit_that_fits() {
        assert_eq!(clock(30.0), "30 s");
        assert_eq!(clock(1_800.0), "30 min");
        assert_eq!(clock(36_000.0), "10.0 h");
        assert_eq!(clock(864_000.0), "10.0 d");
    }

    #[test]
    fn a_step_chart_draws_each_point_as_a_flat_step() {
        let mut out = String::new();
        chart(
            &mut out,
            "t",
            10.0,
            &[Line {
                label: "l",
                values: &[0.0, 2.0],
                color: "#000",
            }],
            count,
        );
        // Two steps: 0 over the first half, the top of the plot over the second.
        let plot_w = WIDTH - LEFT - RIGHT;
        let mid = LEFT + plot_w / 2.0;
        let bottom = HEIGHT - BOTTOM;
        assert!(
            out.contains(&format!(
                "points=\"{LEFT:.1},{bottom:.1} {mid:.1},{bottom:.1} {mid:.1},{TOP:.1} {:.1},{TOP:.1}\"",
                WIDTH - RIGHT
            )),
            "{out}"
        );
        assert!(
            out.contains(">20 s<"),
            "the axis ends at the run's end: {out}"
        );
    }
}
