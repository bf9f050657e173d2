//! The command line as a user runs it: exit codes, messages, files.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn nodewright(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn tmp(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

/// The built-in tutorial's log, simulated into `dir`.
fn tutorial_log(dir: &tempfile::TempDir) -> PathBuf {
    let log = tmp(dir, "a.nwlog");
    let out = nodewright(&["simulate", "--log", s(&log)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    log
}

#[test]
fn simulate_then_replay_verify_then_a_flipped_byte() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = tmp(&dir, "a.nwlog");
    let report = tmp(&dir, "a.json");
    let out = nodewright(&["simulate", "--log", s(&log), "--report", s(&report)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("scenario seed-tutorial"));

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report written"))
            .expect("json");
    for key in [
        "scenario",
        "seed",
        "events",
        "commands",
        "decision_digest",
        "pods",
        "nodes",
        "cost",
        "utilization",
        "disruptions",
        "invariant_violations",
        "expectations",
        "machines",
        "pod_placements",
        "unschedulable",
    ] {
        assert!(json.get(key).is_some(), "report lacks {key}");
    }
    assert_eq!(json["nodes"]["final"], 0);
    assert_eq!(
        json["pods"]["pending_seconds"].as_object().map(|o| o.len()),
        Some(3)
    );

    let verified = nodewright(&["replay", s(&log), "--verify"]);
    assert_eq!(verified.status.code(), Some(0), "{}", text(&verified));
    let digest = json["decision_digest"].as_str().expect("digest");
    assert!(text(&verified).contains(digest), "{}", text(&verified));

    // A second run with the same seed gives the same digest.
    let report2 = tmp(&dir, "b.json");
    let again = nodewright(&["simulate", "--seed", "1", "--report", s(&report2)]);
    assert_eq!(again.status.code(), Some(0));
    let json2: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report2).expect("written")).expect("json");
    assert_eq!(json2["decision_digest"], json["decision_digest"]);

    let mut bytes = std::fs::read(&log).expect("log");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    let flipped = tmp(&dir, "flipped.nwlog");
    std::fs::write(&flipped, &bytes).expect("write");
    let broken = nodewright(&["replay", s(&flipped), "--verify"]);
    assert_eq!(broken.status.code(), Some(2), "{}", text(&broken));
    let message = text(&broken);
    assert!(message.contains("frame"), "{message}");
    assert!(
        message.contains("checksum") || message.contains("incomplete"),
        "{message}"
    );
    assert!(!message.contains("panicked"), "{message}");
}

#[test]
fn log_inspect_summarises() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = tutorial_log(&dir);
    let out = nodewright(&["log", "inspect", s(&log)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("nwlog format version 8"), "{t}");
    assert!(t.contains("LaunchNodeClaim"), "{t}");
    assert!(t.contains("PodApplied"), "{t}");
}

#[test]
fn unreadable_logs_exit_2_without_a_backtrace() {
    let dir = tempfile::tempdir().expect("tempdir");
    let not_a_log = tmp(&dir, "x.nwlog");
    std::fs::write(&not_a_log, b"hello, this is not a log").expect("write");
    for args in [
        vec!["replay", s(&not_a_log), "--verify"],
        vec!["replay", "/nonexistent/nodewright.nwlog", "--verify"],
        vec!["log", "inspect", s(&not_a_log)],
    ] {
        let out = nodewright(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out));
        assert!(!text(&out).contains("panicked"), "{}", text(&out));
    }
}

#[test]
fn a_truncated_log_names_the_torn_frame() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = tutorial_log(&dir);
    let bytes = std::fs::read(&log).expect("log");
    let cut = tmp(&dir, "cut.nwlog");
    std::fs::write(&cut, &bytes[..bytes.len() - 3]).expect("write");
    let out = nodewright(&["replay", s(&cut), "--verify"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("incomplete"), "{}", text(&out));
}

#[test]
fn a_bad_scenario_is_refused_before_anything_runs() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = tmp(&dir, "bad.yaml");
    std::fs::write(
        &path,
        "name: bad\nmanifests:\n  - |\n    apiVersion: karpenter.sh/v1\n    kind: NodePool\n    metadata: {name: p}\n    spec:\n      template:\n        spec:\n          requirements:\n            - {key: kubernetes.io/arch, operator: Inn, values: [amd64]}\n          nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n",
    )
    .expect("write");
    let log = tmp(&dir, "never.nwlog");
    let out = nodewright(&["simulate", s(&path), "--log", s(&log)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("bad.yaml"), "{t}");
    assert!(t.contains("requirements[0].operator"), "{t}");
    assert!(t.contains("In, NotIn"), "{t}");
    assert!(!log.exists(), "nothing runs on bad input");
}

#[test]
fn an_unknown_scenario_name_is_explained() {
    let out = nodewright(&["simulate", "no-such-scenario"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("seed-tutorial"), "{}", text(&out));
}

#[test]
fn simulate_a_trace_and_refuse_bad_traces_and_seed_ranges() {
    let dir = tempfile::tempdir().expect("tempdir");
    let csv = tmp(&dir, "pods.csv");
    std::fs::write(
        &csv,
        "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
         a,4000,8192,1,500,,LS,Running,0,1200,0\n\
         b,1000,2048,0,0,,BE,Running,30,900,30\n",
    )
    .expect("written");
    let report = tmp(&dir, "t.json");
    let trace = format!("alibaba-openb:{}", s(&csv));
    let out = nodewright(&["simulate", "--trace", &trace, "--report", s(&report)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("2 pods (1 with GPUs)"),
        "{}",
        text(&out)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("report")).expect("json");
    assert_eq!(json["pods"]["scheduled"], 2);

    let out = nodewright(&["simulate", "--trace", "google:pods.csv"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("alibaba-openb"), "{}", text(&out));
    std::fs::write(&csv, "name,cpu_milli\nx,1\n").expect("written");
    let out = nodewright(&["simulate", "--trace", &trace]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("line 1"), "{}", text(&out));
    let out = nodewright(&["simulate", "--seeds", "9..3"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("FROM..TO"), "{}", text(&out));
    let out = nodewright(&["simulate", "--seeds", "1..4"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(text(&out).contains("3 passed, 0 failed"), "{}", text(&out));
}

#[test]
fn simulate_html_is_one_page_with_the_plots_and_the_decisions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let html = tmp(&dir, "a.html");
    let json = tmp(&dir, "a.json");
    let out = nodewright(&["simulate", "--html", s(&html), "--report", s(&json)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let page = std::fs::read_to_string(&html).expect("page written");
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("report")).expect("json");
    assert!(page.starts_with("<!DOCTYPE html>"));
    for title in [
        "Machines running",
        "Cost per hour",
        "Pending pods",
        "Utilisation",
    ] {
        assert!(page.contains(title), "{title}");
    }
    assert_eq!(page.matches("<svg").count(), 4);
    // Every machine of the report is in the table of decisions, with its reasons.
    for m in report["machines"].as_array().expect("machines") {
        let name = m["name"].as_str().expect("name");
        assert!(page.contains(&format!("<td>{name}</td>")), "{name}");
        assert!(page.contains("Empty: node"), "the termination reason");
    }
    // Offline: nothing is fetched.
    for fetch in ["<script", "src=", "href=", "@import", "url("] {
        assert!(!page.contains(fetch), "{fetch}");
    }
    // The series the plots draw are in the report, one point per step.
    let series = &report["series"];
    let machines = series["machines"].as_array().expect("series");
    let step = series["step_seconds"].as_f64().expect("step");
    let duration = report["duration_seconds"].as_f64().expect("duration");
    assert_eq!(machines.len() as f64, (duration / step).ceil());
    assert!(
        machines.iter().any(|v| v.as_f64() > Some(0.5)),
        "a machine ran"
    );
    assert_eq!(
        machines.last().and_then(|v| v.as_f64()),
        Some(0.0),
        "none at the end"
    );
}

#[test]
fn crds_prints_the_three_crds_as_yaml() {
    let out = nodewright(&["crds"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let yaml = String::from_utf8(out.stdout).expect("UTF-8");
    let names: Vec<&str> = yaml
        .lines()
        .filter_map(|l| l.strip_prefix("  name: "))
        .collect();
    assert_eq!(
        names,
        [
            "nodepools.karpenter.sh",
            "nodeclaims.karpenter.sh",
            "ec2nodeclasses.karpenter.k8s.aws"
        ]
    );
    assert_eq!(yaml.matches("kind: CustomResourceDefinition").count(), 3);
    assert!(yaml.contains("x-kubernetes-validations"));
}

#[cfg(feature = "controller")]
#[test]
fn controller_refuses_a_bad_setting_naming_it_and_the_fix() {
    let out = nodewright(&[
        "controller",
        "--cluster-name",
        "demo",
        "--feature-gates",
        "SpotToSpotConsolidation=yes",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("FEATURE_GATES"), "{stderr}");
    assert!(stderr.contains("fix:"), "{stderr}");

    let out = nodewright(&[
        "controller",
        "--cluster-name",
        "demo",
        "--batch-idle-duration",
        "20s",
        "--batch-max-duration",
        "10s",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("BATCH_IDLE_DURATION"));
}

#[cfg(unix)]
#[test]
fn output_into_a_reader_that_stops_early_ends_quietly() {
    use std::io::Read;
    use std::os::unix::process::ExitStatusExt;
    // `nodewright crds | head -1`: the CRDs are larger than a pipe's buffer, so the writer
    // meets the closed pipe.
    let mut child = Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .arg("crds")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut first = [0u8; 16];
    child
        .stdout
        .take()
        .expect("its output")
        .read_exact(&mut first)
        .expect("some output");
    // The reader is gone (dropped above).
    let out = child.wait_with_output().expect("it ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(out.status.signal(), Some(libc::SIGPIPE), "{:?}", out.status);
}

#[test]
fn simulate_help_lists_every_built_in_scenario() {
    let help = text(&nodewright(&["simulate", "--help"]));
    for name in nodewright_testkit::scenario::builtin_names() {
        assert!(help.contains(name), "{name} is not in\n{help}");
    }
}

#[test]
fn a_windows_nodepool_on_a_linux_class_is_said_at_load_to_launch_nothing() {
    let dir = tempfile::tempdir().expect("a folder");
    let class = std::fs::read_to_string(format!(
        "{}/scenarios/tutorial/ec2nodeclass.yaml",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("the tutorial's EC2NodeClass");
    let pool = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: windows}\nspec:\n  template:\n    spec:\n      requirements:\n        - {key: kubernetes.io/os, operator: In, values: [windows]}\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: default}\n";
    let file = tmp(&dir, "windows.yaml");
    std::fs::write(&file, format!("{class}---\n{pool}")).expect("written");
    let out = nodewright(&["simulate", s(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let said = stderr
        .lines()
        .filter(|l| {
            l.starts_with(
                "warning: windows: NodePool \"windows\" requires kubernetes.io/os In [windows]",
            )
        })
        .count();
    assert_eq!(said, 1, "said once: {stderr}");
    assert!(
        stderr.contains("its EC2NodeClass \"default\" runs linux (its AMI family): it launches nothing; give it a class of a Windows AMI family"),
        "{stderr}"
    );
}

/// The tutorial's NodePool and EC2NodeClass as one file, with `extra` added to the class's spec.
fn tutorial_pool_and_class(class_extra: &str) -> String {
    let read = |file: &str| {
        std::fs::read_to_string(format!(
            "{}/scenarios/tutorial/{file}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .expect("a tutorial file")
    };
    format!(
        "{}---\n{}{class_extra}",
        read("nodepool.yaml"),
        read("ec2nodeclass.yaml")
    )
}

fn deployment(name: &str, kind: &str, replicas: u32, requests: &str) -> String {
    format!(
        "---\napiVersion: apps/v1\nkind: {kind}\nmetadata: {{name: {name}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{app: {name}}}}}\n  template:\n    metadata: {{labels: {{app: {name}}}}}\n    spec:\n      containers: [{{name: c, image: x, resources: {{requests: {requests}}}}}]\n"
    )
}

#[test]
fn a_field_the_simulation_does_not_model_is_said_once_and_listed_in_the_report() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = tmp(&dir, "mine.yaml");
    let yaml = tutorial_pool_and_class(
        "  userData: |\n    echo hello\n  detailedMonitoring: true\n  context: reservation-context\n  kubelet:\n    clusterDNS: [10.100.0.10]\n",
    ) + &deployment("web", "Deployment", 2, "{cpu: 1, memory: 1Gi}");
    std::fs::write(&file, yaml).expect("written");
    let report = tmp(&dir, "report.json");
    let out = nodewright(&["simulate", s(&file), "--report", s(&report)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    for field in [
        "`spec.userData`",
        "`spec.detailedMonitoring`",
        "`spec.context`",
        "`spec.kubelet.clusterDNS`",
    ] {
        let lines: Vec<&str> = stderr.lines().filter(|l| l.contains(field)).collect();
        assert_eq!(lines.len(), 1, "{field} said once: {stderr}");
        assert!(
            lines[0].starts_with("note: ") && lines[0].contains("not modelled in simulation"),
            "{}",
            lines[0]
        );
    }
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("json");
    let fields: Vec<&str> = report["unmodelled_fields"]
        .as_array()
        .expect("a list")
        .iter()
        .map(|f| f["field"].as_str().expect("a field"))
        .collect();
    assert_eq!(
        fields,
        [
            "spec.userData",
            "spec.detailedMonitoring",
            "spec.context",
            "spec.kubelet.clusterDNS"
        ]
    );
    assert_eq!(
        report["unmodelled_fields"][0]["object"],
        "EC2NodeClass/default"
    );
    assert_eq!(
        report["unmodelled_fields"][0]["applied_by_controller"],
        true
    );
    // spec.context: the controller passes it to CreateFleet.
    assert_eq!(
        report["unmodelled_fields"][2]["applied_by_controller"],
        true
    );
    assert_eq!(
        report["unmodelled_fields"][3]["applied_by_controller"],
        true
    );
}

#[test]
fn pods_never_scheduled_are_summarised_by_reason_and_a_missing_resource_is_named() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = tmp(&dir, "mine.yaml");
    let yaml = tutorial_pool_and_class("")
        + &deployment(
            "huge",
            "Deployment",
            4,
            "{cpu: 1, memory: 1Gi, hugepages-2Mi: 1Gi}",
        )
        + &deployment(
            "fpga",
            "Deployment",
            2,
            "{cpu: 1, memory: 1Gi, example.com/fpga: 1}",
        )
        + &deployment("web", "Deployment", 1, "{cpu: 1, memory: 1Gi}");
    std::fs::write(&file, yaml).expect("written");
    let out = nodewright(&["simulate", s(&file)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("never scheduled: 6 pods, for 2 reasons"),
        "{stdout}"
    );
    let groups: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("  4 pods (") || l.starts_with("  2 pods ("))
        .collect();
    assert_eq!(groups.len(), 2, "{stdout}");
    assert!(
        groups[0].starts_with("  4 pods (default/huge-"),
        "{}",
        groups[0]
    );
    assert!(groups[0].contains(" and 1 more): "), "{}", groups[0]);
    assert!(
        groups[0].contains("none offers enough hugepages-2Mi"),
        "{}",
        groups[0]
    );
    assert!(
        groups[1].contains("none offers enough example.com/fpga"),
        "{}",
        groups[1]
    );
    assert!(
        !stdout.lines().any(|l| l.starts_with("unschedulable ")),
        "no line per pod: {stdout}"
    );
}

#[test]
fn statefulsets_and_replicasets_run_with_their_own_pod_names() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = tmp(&dir, "mine.yaml");
    let yaml = tutorial_pool_and_class("")
        + &deployment("db", "StatefulSet", 3, "{cpu: 1, memory: 1Gi}")
        + &deployment("cache", "ReplicaSet", 2, "{cpu: 1, memory: 1Gi}");
    std::fs::write(&file, yaml).expect("written");
    let report = tmp(&dir, "report.json");
    let out = nodewright(&["simulate", s(&file), "--report", s(&report)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("json");
    let mut placed: Vec<String> = report["pod_placements"]
        .as_array()
        .expect("a list")
        .iter()
        .filter(|p| !p["node"].is_null())
        .map(|p| p["pod"].as_str().expect("a name").to_string())
        .collect();
    placed.sort();
    assert_eq!(placed.len(), 5, "{placed:?}");
    assert_eq!(
        &placed[2..],
        ["default/db-0", "default/db-1", "default/db-2"]
    );
    for cache in &placed[..2] {
        let suffix = cache
            .strip_prefix("default/cache-")
            .expect("a ReplicaSet's pod");
        assert!(!suffix.contains('-'), "no template hash: {cache}");
    }
}

#[test]
fn a_yaml_error_says_error_once_and_numbers_lines_as_in_the_file() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = tmp(&dir, "mine.yaml");
    // The third document (from line 40 or so) has a key twice.
    let yaml = tutorial_pool_and_class("")
        + "---\napiVersion: apps/v1\nkind: Deployment\nkind: Deployment\nmetadata: {name: x}\n";
    let duplicate_line = yaml.lines().count() - 1;
    std::fs::write(&file, yaml).expect("written");
    let out = nodewright(&["simulate", s(&file)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.matches("error").count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!("mine.yaml:{duplicate_line}:")),
        "the line of the file, {duplicate_line}: {stderr}"
    );
    assert!(stderr.contains("duplicate"), "{stderr}");
    assert!(!stderr.contains("DuplicateKeyPolicy"), "{stderr}");
}

#[test]
fn log_repair_keeps_the_intact_prefix_as_a_log_that_replays_and_explains() {
    let dir = tempfile::tempdir().expect("tempdir");
    let log = tutorial_log(&dir);
    let bytes = std::fs::read(&log).expect("log");
    // Cut near the end, after the launch (the catalog is most of the bytes), and flip a byte
    // near the end: two kinds of damage.
    let cut = tmp(&dir, "cut.nwlog");
    std::fs::write(&cut, &bytes[..bytes.len() - 200]).expect("write");
    let mut flipped_bytes = bytes.clone();
    let at = bytes.len() - 40;
    flipped_bytes[at] ^= 0x55;
    let flipped = tmp(&dir, "flipped.nwlog");
    std::fs::write(&flipped, &flipped_bytes).expect("write");

    let damaged = nodewright(&["replay", s(&cut), "--verify"]);
    assert!(
        text(&damaged).contains("nodewright log repair"),
        "the damage names the command: {}",
        text(&damaged)
    );
    let events_of = |path: &Path| -> u64 {
        let out = nodewright(&["log", "inspect", s(path)]);
        let shown = text(&out);
        let line = shown
            .lines()
            .find(|l| l.contains(" events, "))
            .unwrap_or_else(|| panic!("an events line: {shown}"));
        line.split(|c: char| !c.is_ascii_digit())
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("a count: {line}"))
    };
    let all_events = events_of(&log);
    for (name, damaged) in [("cut", &cut), ("flipped", &flipped)] {
        let repaired = tmp(&dir, &format!("{name}-repaired.nwlog"));
        let out = nodewright(&["log", "repair", s(damaged), "--out", s(&repaired)]);
        assert_eq!(out.status.code(), Some(0), "{name}: {}", text(&out));
        assert!(
            text(&out).contains("kept the intact prefix"),
            "{}",
            text(&out)
        );
        let kept = events_of(&repaired);
        assert!(
            kept > 0 && kept < all_events,
            "{name}: {kept} of {all_events} events"
        );
        let verify = nodewright(&["replay", s(&repaired), "--verify"]);
        assert_eq!(verify.status.code(), Some(0), "{name}: {}", text(&verify));
        let explain = nodewright(&["explain", "--command", "0", s(&repaired)]);
        assert_eq!(explain.status.code(), Some(0), "{name}: {}", text(&explain));
        // It never replaces a file.
        let again = nodewright(&["log", "repair", s(damaged), "--out", s(&repaired)]);
        assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    }
}

#[test]
fn several_manifest_files_and_folders_run_together_as_kubectl_apply_takes_them() {
    let dir = tempfile::tempdir().expect("a folder");
    let pools = tmp(&dir, "pools.yaml");
    std::fs::write(&pools, tutorial_pool_and_class("")).expect("written");
    let apps = tmp(&dir, "apps");
    std::fs::create_dir(&apps).expect("a folder");
    std::fs::write(
        apps.join("web.yaml"),
        deployment("web", "Deployment", 2, "{cpu: 1, memory: 1Gi}"),
    )
    .expect("written");
    std::fs::write(
        apps.join("db.yml"),
        deployment("db", "StatefulSet", 1, "{cpu: 1, memory: 1Gi}"),
    )
    .expect("written");
    let out = nodewright(&["simulate", s(&pools), s(&apps)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("pods: 3 total, 3 scheduled"), "{stdout}");

    // A scenario file stands alone; a missing path is named.
    let scenario = format!("{}/scenarios/steady-state.yaml", env!("CARGO_MANIFEST_DIR"));
    let out = nodewright(&["simulate", s(&pools), &scenario]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("a scenario file runs on its own"),
        "{}",
        text(&out)
    );
    let out = nodewright(&["simulate", s(&pools), "nowhere.yaml"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("nowhere.yaml: no such file or folder"),
        "{}",
        text(&out)
    );
}

#[test]
fn simulate_writes_a_store_that_log_export_cuts_into_a_log_that_replays() {
    let dir = tempfile::tempdir().expect("a folder");
    let store = tmp(&dir, "events.redb");
    let log = tmp(&dir, "whole.nwlog");
    let out = nodewright(&["simulate", "--store", s(&store), "--log", s(&log)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let cut = tmp(&dir, "cut.nwlog");
    let out = nodewright(&["log", "export", s(&store), "--out", s(&cut), "--from", "5m"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let verify = nodewright(&["replay", s(&cut), "--verify"]);
    assert_eq!(verify.status.code(), Some(0), "{}", text(&verify));
    assert!(
        text(&verify).contains("from a snapshot"),
        "{}",
        text(&verify)
    );
    // The whole store exports to the log the run wrote, record for record.
    let whole = tmp(&dir, "exported.nwlog");
    let out = nodewright(&["log", "export", s(&store), "--out", s(&whole)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let digest = |path: &Path| {
        let out = nodewright(&["replay", s(path), "--verify"]);
        text(&out)
            .lines()
            .find(|l| l.contains("digest"))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("a digest: {}", text(&out)))
    };
    assert_eq!(digest(&whole), digest(&log));
    // A store is never overwritten.
    let again = nodewright(&["simulate", "--store", s(&store)]);
    assert_eq!(again.status.code(), Some(2), "{}", text(&again));
    assert!(
        text(&again).contains("a store is never overwritten"),
        "{}",
        text(&again)
    );
    assert!(again.stdout.is_empty(), "refused before the run");
}

#[test]
fn jobs_run_their_pods_to_completion_and_cronjobs_make_jobs_on_schedule() {
    let dir = tempfile::tempdir().expect("a folder");
    let file = tmp(&dir, "jobs.yaml");
    let jobs = "---
apiVersion: batch/v1
kind: Job
metadata:
  name: batch
  annotations: {nodewright.dev/run-time: 10m}
spec:
  completions: 4
  parallelism: 2
  template:
    metadata:
      annotations: {karpenter.sh/do-not-disrupt: \"true\"}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {requests: {cpu: 1, memory: 1Gi}}}]
---
apiVersion: batch/v1
kind: CronJob
metadata: {name: report}
spec:
  schedule: \"*/10 * * * *\"
  concurrencyPolicy: Forbid
  jobTemplate:
    metadata:
      annotations: {nodewright.dev/run-time: 3m}
    spec:
      template:
        metadata:
          annotations: {karpenter.sh/do-not-disrupt: \"true\"}
        spec:
          restartPolicy: OnFailure
          containers: [{name: c, image: x, resources: {requests: {cpu: 2, memory: 2Gi}}}]
";
    std::fs::write(&file, tutorial_pool_and_class("") + jobs).expect("written");
    let report = tmp(&dir, "report.json");
    let out = nodewright(&["simulate", s(&file), "--report", s(&report)]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).expect("the report")).expect("json");
    let placements = report["pod_placements"].as_array().expect("a list");
    let pods = |prefix: &str| -> Vec<&serde_json::Value> {
        placements
            .iter()
            .filter(|p| p["pod"].as_str().is_some_and(|n| n.starts_with(prefix)))
            .collect()
    };
    // Two at a time, four in all: the second pair starts when the first pair ends.
    let batch = pods("default/batch-");
    assert_eq!(batch.len(), 4, "{batch:?}");
    let mut created: Vec<f64> = batch
        .iter()
        .map(|p| p["created_at_seconds"].as_f64().expect("a time"))
        .collect();
    created.sort_by(f64::total_cmp);
    assert_eq!(created[0], created[1]);
    assert_eq!(created[2], created[3]);
    let first_bound = batch
        .iter()
        .filter_map(|p| p["bound_at_seconds"].as_f64())
        .fold(f64::INFINITY, f64::min);
    assert_eq!(
        created[2],
        first_bound + 600.0,
        "ten minutes after the first ran"
    );
    // The CronJob fires at 10m, 20m and 30m (the end); its Jobs are named by the minute.
    let reports: Vec<&str> = pods("default/report-")
        .iter()
        .map(|p| p["pod"].as_str().expect("a name"))
        .collect();
    assert_eq!(reports.len(), 3, "{reports:?}");
    for (pod, minute) in reports.iter().zip([10, 20, 30]) {
        assert!(
            pod.starts_with(&format!("default/report-{minute}-")),
            "{pod}"
        );
    }
    // Each pod ran its run time and no more: 4 × 10 min of batch, 2 × 3 min of report (the
    // third was made at the end).
    let hours = report["pods"]["scheduled_pod_hours"]
        .as_f64()
        .expect("hours");
    assert!((hours - (40.0 + 6.0) / 60.0).abs() < 1e-6, "{hours}");
}

#[test]
fn ephemeral_storage_requests_fit_the_volume_the_node_class_gives() {
    let dir = tempfile::tempdir().expect("a folder");
    let run = |class_extra: &str| -> (String, serde_json::Value) {
        let file = tmp(&dir, "storage.yaml");
        let yaml = tutorial_pool_and_class(class_extra)
            + &deployment(
                "scratch",
                "Deployment",
                2,
                "{cpu: 1, memory: 1Gi, ephemeral-storage: 60Gi}",
            );
        std::fs::write(&file, yaml).expect("written");
        let report = tmp(&dir, "storage.json");
        let out = nodewright(&["simulate", s(&file), "--report", s(&report)]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let json = serde_json::from_str(&std::fs::read_to_string(&report).expect("the report"))
            .expect("json");
        (String::from_utf8_lossy(&out.stdout).into_owned(), json)
    };
    // Karpenter's default 20 GiB root volume holds 17 GiB for pods: nothing fits 60 GiB.
    let (stdout, report) = run("");
    assert_eq!(report["pods"]["scheduled"], 0, "{stdout}");
    assert!(
        stdout.contains("none offers enough ephemeral-storage"),
        "{stdout}"
    );
    assert!(stdout.contains("ephemeral-storage=60Gi"), "{stdout}");
    // A 100 GiB root volume does.
    let (stdout, report) = run(
        "  blockDeviceMappings:\n    - deviceName: /dev/xvda\n      rootVolume: true\n      ebs: {volumeSize: 100Gi, volumeType: gp3}\n",
    );
    assert_eq!(report["pods"]["scheduled"], 2, "{stdout}");
    // RAID0 instance store: only types with local NVMe disks large enough.
    let (stdout, report) = run("  instanceStorePolicy: RAID0\n");
    assert_eq!(report["pods"]["scheduled"], 2, "{stdout}");
    for machine in report["machines"].as_array().expect("machines") {
        let family = machine["instance_type"]
            .as_str()
            .and_then(|t| t.split('.').next())
            .expect("a type");
        assert!(family.ends_with('d'), "a type with local NVMe: {machine}");
    }
}

/// A run that writes no log keeps none, and decides and reports exactly as one that does: the
/// same summary, the same report (the tutorial and the mixed scenario, with its drains,
/// interruptions and snapshots).
#[test]
fn a_simulation_without_a_log_reports_as_one_with_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    for scenario in ["seed-tutorial", "mixed"] {
        let (with, without) = (tmp(&dir, "with.json"), tmp(&dir, "without.json"));
        let log = tmp(&dir, "with.nwlog");
        let logged = nodewright(&["simulate", scenario, "--log", s(&log), "--report", s(&with)]);
        assert_eq!(logged.status.code(), Some(0), "{}", text(&logged));
        let unlogged = nodewright(&["simulate", scenario, "--report", s(&without)]);
        assert_eq!(unlogged.status.code(), Some(0), "{}", text(&unlogged));
        assert_eq!(
            text(&logged),
            text(&unlogged),
            "{scenario}: the printed summary"
        );
        let read = |p: &Path| std::fs::read_to_string(p).expect("report written");
        assert_eq!(read(&with), read(&without), "{scenario}: the JSON report");
        assert!(read(&without).contains("decision_digest"));
    }
}
