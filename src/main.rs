//! The `nodewright` command line: argument parsing and dispatch, nothing else.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use nodewright_adapters::eventlog::{
    DiscardStore, EventStore, LogHeader, LogRecord, MemoryStore, RedbStore,
};
use nodewright_adapters::manifest::Manifest;
use nodewright_core::Command;
use nodewright_testkit::scenario::{self, Scenario};

#[cfg(feature = "controller")]
mod aws_check;
#[cfg(feature = "controller")]
mod controller_cmd;
mod segments;

#[derive(Parser)]
#[command(
    name = "nodewright",
    version,
    about = "A Kubernetes node autoscaler for AWS whose every decision can be replayed and explained."
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Subcommand)]
enum Commands {
    /// Run a scenario in the simulated world (default: the built-in seed tutorial).
    Simulate {
        /// A scenario file, files and folders of plain Kubernetes YAML (NodePools,
        /// EC2NodeClasses, workloads; run together for 30m from their state, as `kubectl apply
        /// -f` takes them), or the name of a built-in scenario: seed-tutorial (the default),
        /// mixed, capacity-reservations, cloud-faults, crash-recovery, custom-labels,
        /// graceful-drain, long-jobs-expire, nodepool-deletion, spot-interruption, spot-storm, spread-lands,
        /// static-pool, steady-state, volume-topology, zonal-spread (the files of
        /// `scenarios/`)
        #[arg(value_name = "SCENARIO")]
        scenario: Vec<String>,
        /// Override the scenario's seed.
        #[arg(long, conflicts_with = "seeds")]
        seed: Option<u64>,
        /// Run the scenario once per seed of a range (`1..200`, end excluded), on every core,
        /// each run stopped at its first broken invariant; print the failing seeds.
        #[arg(long, value_name = "FROM..TO", conflicts_with_all = ["log", "store", "report", "html"])]
        seeds: Option<String>,
        /// Replay a real workload trace instead of a scenario: `alibaba-openb:FILE.csv` (the
        /// pod list of Alibaba's GPU cluster trace; mapping in docs/traces.md).
        #[arg(long, value_name = "KIND:FILE", conflicts_with_all = ["scenario", "seeds"])]
        trace: Option<String>,
        /// With --trace: run the trace this many times faster than real time.
        #[arg(long, default_value_t = 1.0, requires = "trace")]
        time_scale: f64,
        /// With --trace: NodePools (and EC2NodeClasses) to use instead of the built-in ones.
        #[arg(long, value_name = "F.yaml", requires = "trace")]
        nodepool: Option<PathBuf>,
        /// With --trace: what each row becomes: `jobs` (a one-pod Job that runs the row's run
        /// time and is made again when evicted) or `bare` (a pod created and deleted at the
        /// row's times; an evicted one is gone).
        #[arg(long, value_enum, default_value_t = TracePodsArg::Jobs, requires = "trace")]
        trace_pods: TracePodsArg,
        /// With --trace, a variant: keep about this share of the rows (0 < F ≤ 1).
        #[arg(long, value_name = "F", default_value_t = 1.0, requires = "trace")]
        sample: f64,
        /// With --trace, a variant: make this many pods of each row (scales the load).
        #[arg(long, value_name = "N", default_value_t = 1, requires = "trace")]
        copies: u32,
        /// With --trace, a variant: start each pod up to this many seconds (of trace time)
        /// later than its row says, drawn per pod.
        #[arg(long, value_name = "SECONDS", default_value_t = 0, requires = "trace")]
        shift: u64,
        /// With --trace: the seed of the variant's draws (--sample, --shift).
        #[arg(long, value_name = "N", default_value_t = 1, requires = "trace")]
        variant_seed: u64,
        /// Settings over the scenario's: a file with one `settings:` document (the keys of a
        /// scenario's `settings`, as in a what-if policy), e.g. `settings: {countLostWork: false}`.
        #[arg(long, value_name = "F.yaml", conflicts_with = "seeds")]
        settings: Option<PathBuf>,
        /// Write the event log (every event and command) to this .nwlog file.
        #[arg(long)]
        log: Option<PathBuf>,
        /// Write the event log as the controller keeps it, a redb store (a new file), to try
        /// `nodewright log export` without a cluster.
        #[arg(long, value_name = "F.redb")]
        store: Option<PathBuf>,
        /// Write the JSON report to this file.
        #[arg(long)]
        report: Option<PathBuf>,
        /// Write the report as one self-contained HTML page (plots over time, the decisions).
        #[arg(long, value_name = "F.html")]
        html: Option<PathBuf>,
        /// Run through the controller's own loop on madsim, under the seed's fault plan (late
        /// and failing API calls, late watches, lost and repeated interruption messages,
        /// controller crashes). Only in the simulated build: RUSTFLAGS="--cfg madsim".
        #[arg(long)]
        madsim: bool,
    },
    /// Re-run the core over a log.
    Replay {
        /// The .nwlog file.
        log: PathBuf,
        /// Check that every event gives exactly the recorded commands.
        #[arg(long, conflicts_with = "policy")]
        verify: bool,
        /// With --verify: threads that check the log's parts side by side (it is cut at the
        /// snapshots this build wrote); the outcome is the same as one check from the start.
        /// Default: the machine's cores.
        #[arg(long, value_name = "N", requires = "verify", value_parser = clap::value_parser!(u32).range(1..=256))]
        jobs: Option<u32>,
        /// What-if: the recorded world under these NodePools / EC2NodeClasses / settings;
        /// prints the decision diff and the change in cost, pending time and disruptions.
        #[arg(long, value_name = "F.yaml")]
        policy: Option<PathBuf>,
        /// With --policy: write the comparison as JSON to this file.
        #[arg(long, value_name = "F.json", requires = "policy")]
        report: Option<PathBuf>,
        /// With --policy: write the what-if run's event log to this .nwlog file, for
        /// `explain` (why the new policy launched a machine, why a pod waited).
        #[arg(long = "log", value_name = "F.nwlog", requires = "policy")]
        what_if_log: Option<PathBuf>,
    },
    /// Tell the story of a pod, a node or a command from a log: why it happened, with what the
    /// core knew then.
    #[command(group(clap::ArgGroup::new("subject").required(true).args(["pod", "node", "command"])))]
    Explain {
        /// The .nwlog file.
        log: PathBuf,
        /// A pod, `namespace/name` (or `name` in `default`): when it went pending, what was
        /// considered and what ruled each candidate out, where it landed.
        #[arg(long)]
        pod: Option<String>,
        /// A node or NodeClaim name: why it was launched, what ran on it, why it was removed.
        #[arg(long)]
        node: Option<String>,
        /// A command's index (from 0, in log order): the event that gave it and the events
        /// before it about what it names.
        #[arg(long, value_name = "INDEX")]
        command: Option<u64>,
    },
    /// Read event logs.
    Log {
        #[command(subcommand)]
        command: LogCommands,
    },
    /// Benchmarks.
    Bench {
        #[command(subcommand)]
        command: BenchCommands,
    },
    /// Print the CustomResourceDefinitions of NodePool, NodeClaim and EC2NodeClass as YAML,
    /// ready for `kubectl apply -f -` (or `--server-side`).
    Crds,
    /// Run the in-cluster controller (AWS credentials and endpoint from the environment, the
    /// API server from the pod's service account or KUBECONFIG).
    #[cfg(feature = "controller")]
    Controller(Box<controller_cmd::ControllerArgs>),
    /// Talk to AWS (the region, credentials and endpoint come from the environment:
    /// AWS_REGION, AWS_PROFILE or AWS_ACCESS_KEY_ID..., AWS_ENDPOINT_URL).
    #[cfg(feature = "controller")]
    Aws {
        #[command(subcommand)]
        command: AwsCommands,
    },
}

#[cfg(feature = "controller")]
#[derive(Subcommand)]
enum AwsCommands {
    /// Resolve what a launch needs (subnets, security groups, AMIs, instance types, the
    /// interruption queue) and say which selector matched nothing; exit 1 if one did.
    Check {
        /// A file with the EC2NodeClass(es) to check.
        #[arg(long)]
        nodeclass: PathBuf,
        /// A file with NodePools: how many instance types each allows, and where.
        #[arg(long)]
        nodepool: Option<PathBuf>,
        /// The interruption queue's name (Karpenter's INTERRUPTION_QUEUE).
        #[arg(long)]
        queue: Option<String>,
        /// The cluster's Kubernetes version, for AMI aliases.
        #[arg(long, env = "KUBERNETES_VERSION", default_value = "1.34")]
        kubernetes_version: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Subcommand)]
enum BenchCommands {
    /// Karpenter's scheduling benchmark: one full solve of the pod mix over 400 synthetic types.
    Scheduling {
        /// How many pods (Karpenter measures 1, 50, 100, 500, 1000, 2000, 5000, 10000, 20000).
        #[arg(long, default_value_t = 1000)]
        pods: usize,
        /// Run the preference case (identical pods with preferred affinities) instead of the mix.
        #[arg(long)]
        preferences: bool,
        /// With --preferences: ignore preferences (preferencePolicy Ignore).
        #[arg(long)]
        ignore_preferences: bool,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// One consolidation search (multi-node, then single-node) over a half-full cluster.
    Consolidation {
        #[arg(long, default_value_t = 1000)]
        nodes: usize,
        #[arg(long, default_value_t = 10000)]
        pods: usize,
        /// Spread the pods over this many services, each with a PodDisruptionBudget
        /// (maxUnavailable 1).
        #[arg(long, default_value_t = 0)]
        pdbs: usize,
    },
}

#[derive(Subcommand)]
enum LogCommands {
    /// Summarise a log: format, time range, counts by event and command kind.
    Inspect {
        /// The .nwlog file.
        log: PathBuf,
    },
    /// Cut a time range of the controller's event store (a redb file) into a portable .nwlog
    /// that replays on its own (a range that starts later than the store begins with a
    /// snapshot of the core at its start); or, with --segments, assemble the range from the
    /// sealed segments the leaders shipped, across segments and leader terms.
    Export {
        /// The controller's store.
        #[arg(required_unless_present = "segments", conflicts_with = "segments")]
        store: Option<PathBuf>,
        /// The sealed segments to assemble the range from: a folder (`aws s3 sync` of the
        /// bucket), or `s3://<bucket>/<prefix>/<cluster>` (the controller build reads S3 itself).
        #[arg(long, value_name = "FOLDER|S3 URL", conflicts_with = "redact")]
        segments: Option<String>,
        /// The .nwlog file to write.
        #[arg(long, short)]
        out: PathBuf,
        /// The first event's time: RFC 3339 (`2026-12-01T09:00:00Z`), or a duration from the
        /// clock's origin (`90m`; a simulation's clock starts at 0).
        #[arg(long, value_name = "TIME")]
        from: Option<String>,
        /// The time the range ends before, written as --from.
        #[arg(long, value_name = "TIME")]
        until: Option<String>,
        /// Replace pod names, namespaces and label values by tokens (the same value, the same
        /// token; in the same order, so that the log still replays exactly). docs/event-log.md
        /// says what is kept.
        #[arg(long)]
        redact: bool,
    },
    /// Write the intact prefix of a damaged .nwlog as a log of its own (up to the first
    /// damaged frame; an event whose commands may have been in that frame is left out), which
    /// replays, explains and exports like any log.
    Repair {
        /// The damaged .nwlog file.
        log: PathBuf,
        /// The .nwlog file to write (it must not exist).
        #[arg(long, short)]
        out: PathBuf,
    },
}

/// Exit codes: 0 success, 1 a failed check (invariant, expectation, divergence), 2 bad input.
const EXIT_FAILED_CHECK: u8 = 1;
const EXIT_BAD_INPUT: u8 = 2;

/// Output piped into a reader that stops early (`nodewright log inspect F | head`): the
/// process ends as other Unix tools do, by SIGPIPE, rather than panicking in `println!` on
/// the broken pipe (Rust ignores SIGPIPE by default).
fn end_quietly_on_a_closed_pipe() {
    #[cfg(unix)]
    // SAFETY: restoring a signal's default disposition at the start of `main`, before any
    // thread exists, has no memory-safety precondition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
}

fn main() -> ExitCode {
    end_quietly_on_a_closed_pipe();
    let cli = Cli::parse();
    let result = match cli.command {
        Commands::Simulate {
            scenario,
            seeds: Some(range),
            madsim,
            ..
        } => simulate_seeds(&scenario, &range, madsim),
        Commands::Simulate {
            scenario,
            seed,
            log,
            report,
            html,
            seeds: None,
            store,
            trace,
            time_scale,
            nodepool,
            trace_pods,
            sample,
            copies,
            shift,
            variant_seed,
            settings,
            madsim,
        } => {
            let options = scenario::trace::TraceOptions {
                time_scale,
                pods: trace_pods.into(),
                // Out-of-range shares are refused by the loader with the flag named.
                sample_per_mille: (sample * 1000.0).round().clamp(0.0, u32::MAX as f64) as u32,
                copies,
                shift_max_s: shift,
                seed: variant_seed,
            };
            let loaded = match &trace {
                Some(trace) => load_trace(trace, options, nodepool.as_deref()),
                None => load_scenario(&scenario),
            };
            let loaded = match store.as_deref().filter(|p| p.exists()) {
                Some(path) => Err(anyhow::anyhow!(
                    "--store {}: the file exists, and a store is never overwritten; give a new path or move the file away",
                    path.display()
                )),
                None => loaded,
            };
            let loaded = match &settings {
                Some(path) => loaded.and_then(|s| with_settings(s, path)),
                None => loaded,
            };
            let outputs = Outputs {
                log: log.as_deref(),
                store: store.as_deref(),
                report: report.as_deref(),
                html: html.as_deref(),
            };
            let seeded = loaded.map(|s| match seed {
                Some(seed) => s.with_seed(seed),
                None => s,
            });
            seeded.and_then(|scenario| match madsim {
                true => simulate_madsim(scenario, outputs),
                false => simulate(scenario, outputs),
            })
        }
        Commands::Replay {
            log,
            policy: Some(policy),
            report,
            what_if_log,
            ..
        } => what_if(&log, &policy, report.as_deref(), what_if_log.as_deref()),
        Commands::Replay {
            log, verify, jobs, ..
        } => replay(&log, verify, jobs),
        Commands::Explain {
            log,
            pod,
            node,
            command,
        } => {
            let subject = match (pod, node, command) {
                (Some(pod), _, _) => nodewright_replay::Subject::pod(&pod),
                (_, Some(node), _) => nodewright_replay::Subject::Node(node),
                (_, _, Some(index)) => nodewright_replay::Subject::Command(index),
                // clap's group requires one of them.
                (None, None, None) => unreachable!("clap requires --pod, --node or --command"),
            };
            explain(&log, &subject)
        }
        Commands::Log {
            command: LogCommands::Inspect { log },
        } => inspect(&log),
        Commands::Log {
            command: LogCommands::Repair { log, out },
        } => repair(&log, &out),
        Commands::Log {
            command:
                LogCommands::Export {
                    store,
                    segments,
                    out,
                    from,
                    until,
                    redact,
                },
        } => match (store, segments) {
            (_, Some(segments)) => {
                assemble_segments(&segments, &out, from.as_deref(), until.as_deref())
            }
            (Some(store), None) => export(&store, &out, from.as_deref(), until.as_deref(), redact),
            (None, None) => {
                eprintln!("error: name the store, or --segments");
                Ok(EXIT_BAD_INPUT)
            }
        },
        Commands::Bench {
            command:
                BenchCommands::Scheduling {
                    pods,
                    preferences,
                    ignore_preferences,
                    json,
                },
        } => bench_scheduling(pods, preferences, ignore_preferences, json),
        Commands::Bench {
            command: BenchCommands::Consolidation { nodes, pods, pdbs },
        } => {
            let (seconds, removed) =
                nodewright_testkit::bench::consolidation_pass(nodes, pods, pdbs);
            println!(
                "consolidation search over {nodes} nodes, {pods} pods and {pdbs} PodDisruptionBudgets: {:.3}s; the decision removes {removed} nodes",
                seconds
            );
            Ok(0)
        }
        Commands::Crds => print_crds(),
        #[cfg(feature = "controller")]
        Commands::Controller(args) => controller_cmd::run(&args),
        #[cfg(feature = "controller")]
        Commands::Aws {
            command:
                AwsCommands::Check {
                    nodeclass,
                    nodepool,
                    queue,
                    kubernetes_version,
                    json,
                },
        } => aws_check::check(&aws_check::CheckArgs {
            nodeclass: &nodeclass,
            nodepool: nodepool.as_deref(),
            queue: queue.as_deref(),
            kubernetes_version: &kubernetes_version,
            json,
        }),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}

fn print_crds() -> Result<u8> {
    print!("{}", nodewright_api::crds_text());
    Ok(0)
}

/// [`find_scenario`], its warnings said once.
fn load_scenario(names_or_paths: &[String]) -> Result<Scenario> {
    let scenario = match names_or_paths {
        [] => find_scenario(None)?,
        [one] => find_scenario(Some(one))?,
        several => {
            let paths: Vec<PathBuf> = several.iter().map(PathBuf::from).collect();
            if let Some(missing) = paths.iter().find(|p| !p.exists()) {
                anyhow::bail!(
                    "{}: no such file or folder (several arguments are files and folders of Kubernetes manifests, run together)",
                    missing.display()
                );
            }
            scenario::load_paths(&paths)?
        }
    };
    for warning in &scenario.warnings {
        eprintln!("warning: {}: {warning}", scenario.name);
    }
    for field in &scenario.unmodelled {
        eprintln!("note: {field}");
    }
    Ok(scenario)
}

fn find_scenario(name_or_path: Option<&str>) -> Result<Scenario> {
    let name = name_or_path.unwrap_or("seed-tutorial");
    if let Some(builtin) = scenario::builtin(name) {
        return builtin.with_context(|| format!("the built-in scenario {name} does not load"));
    }
    let path = Path::new(name);
    if !path.exists() {
        anyhow::bail!(
            "{name} is neither a scenario file, a Kubernetes manifest file or folder, nor a built-in scenario (built-in: {})",
            scenario::builtin_names().collect::<Vec<_>>().join(", ")
        );
    }
    Ok(scenario::load_path(path)?)
}

/// `--settings F.yaml` over the scenario's configuration.
fn with_settings(mut scenario: Scenario, path: &Path) -> Result<Scenario> {
    let policy = nodewright_testkit::whatif::Policy::load(path)?;
    if !policy.changes_only_settings() {
        anyhow::bail!(
            "--settings {}: holds NodePools or EC2NodeClasses; keep one `settings:` document here (NodePools go in the scenario, or in --nodepool with --trace)",
            path.display()
        );
    }
    policy.apply_settings(&mut scenario.config)?;
    Ok(scenario)
}

/// `--trace-pods`.
#[derive(Clone, Copy, clap::ValueEnum)]
enum TracePodsArg {
    Jobs,
    Bare,
}

impl From<TracePodsArg> for scenario::trace::TracePods {
    fn from(arg: TracePodsArg) -> Self {
        match arg {
            TracePodsArg::Jobs => scenario::trace::TracePods::Jobs,
            TracePodsArg::Bare => scenario::trace::TracePods::BarePods,
        }
    }
}

/// `alibaba-openb:FILE.csv` as a scenario.
fn load_trace(
    trace: &str,
    options: scenario::trace::TraceOptions,
    nodepool: Option<&Path>,
) -> Result<Scenario> {
    let Some(("alibaba-openb", file)) = trace.split_once(':') else {
        anyhow::bail!(
            "--trace {trace:?}: give KIND:FILE, and the one kind known is alibaba-openb (--trace alibaba-openb:pods.csv)"
        );
    };
    let csv = std::fs::read_to_string(file).with_context(|| format!("cannot read {file}"))?;
    let mut base = scenario::trace::alibaba_openb_base()?;
    if let Some(path) = nodepool {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        let given =
            nodewright_adapters::manifest::parse_manifests(&text, &path.display().to_string())?;
        let pools = given.iter().any(|m| matches!(m, Manifest::NodePool(_)));
        if !pools {
            anyhow::bail!(
                "{}: holds no NodePool; give the NodePools (and EC2NodeClasses) the trace should run under",
                path.display()
            );
        }
        let classes = given.iter().any(|m| matches!(m, Manifest::NodeClass(_)));
        base.manifests.retain(|m| match m {
            Manifest::NodePool(_) => false,
            Manifest::NodeClass(_) => !classes,
            _ => true,
        });
        base.manifests.extend(given);
    }
    let (scenario, summary) = scenario::trace::alibaba_openb(&csv, file, options, base)?;
    eprintln!(
        "trace {file}: {} rows, {} pods ({} with GPUs), {} that never ran left out",
        summary.rows, summary.pods, summary.gpu_pods, summary.never_ran
    );
    Ok(scenario)
}

/// Where a run's log and report go.
#[derive(Clone, Copy)]
struct Outputs<'a> {
    log: Option<&'a Path>,
    store: Option<&'a Path>,
    report: Option<&'a Path>,
    html: Option<&'a Path>,
}

impl Outputs<'_> {
    /// Whether a run must keep its log: one is to be written.
    fn keep_log(self) -> bool {
        self.log.is_some() || self.store.is_some()
    }

    /// Writes the log and the report asked for, prints the summary; the exit code. `store` is
    /// the run's log, kept when [`Outputs::keep_log`] says so.
    fn write(
        self,
        report: &nodewright_testkit::Report,
        store: Option<&MemoryStore<LogHeader, LogRecord>>,
    ) -> Result<u8> {
        let kept = |what: &str| {
            store.ok_or_else(|| anyhow::anyhow!("the run kept no log to write as {what}"))
        };
        if let Some(path) = self.log {
            let store = kept("--log")?;
            let file =
                File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
            store
                .write_nwlog(BufWriter::new(file))
                .with_context(|| format!("cannot write the event log {}", path.display()))?;
        }
        if let Some(path) = self.store {
            write_store(kept("--store")?, path)
                .with_context(|| format!("cannot write the event store {}", path.display()))?;
        }
        if let Some(path) = self.report {
            let json = serde_json::to_string_pretty(report)?;
            std::fs::write(path, json + "\n")
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        if let Some(path) = self.html {
            std::fs::write(path, nodewright_testkit::html::render(report))
                .with_context(|| format!("cannot write {}", path.display()))?;
        }
        print!("{}", report.summary());
        Ok(if report.passed() {
            0
        } else {
            EXIT_FAILED_CHECK
        })
    }
}

/// The run's records as a controller's redb store, in bounded batches.
fn write_store(
    log: &MemoryStore<LogHeader, LogRecord>,
    path: &Path,
) -> std::result::Result<(), nodewright_adapters::eventlog::LogError> {
    const BATCH: u64 = 4096;
    let mut store: RedbStore<LogHeader, LogRecord> = RedbStore::create(path, log.header())?;
    let mut from = 0;
    while from < log.len() {
        let to = (from + BATCH).min(log.len());
        store.append(&log.read_range(from, to)?)?;
        from = to;
    }
    Ok(())
}

fn simulate(scenario: Scenario, outputs: Outputs) -> Result<u8> {
    let header = LogHeader::new(scenario.config.clone(), &scenario.name);
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let options = nodewright_testkit::sim::RunOptions {
        progress: tty.then_some(show_progress as fn(u64, u64)),
        ..Default::default()
    };
    // A log nobody asked for is not kept: the driver numbers its records all the same, and the
    // run decides and reports exactly as one that keeps it (it never restarts, so it never
    // reads its log back).
    let (report, store) = if outputs.keep_log() {
        let store: MemoryStore<LogHeader, LogRecord> = MemoryStore::new(header);
        let (report, store) = nodewright_testkit::sim::run_with(&scenario, store, options)?;
        (report, Some(store))
    } else {
        let store = DiscardStore::new(header);
        let (report, _) = nodewright_testkit::sim::run_with(&scenario, store, options)?;
        (report, None)
    };
    if tty {
        eprint!("\r{:60}\r", "");
    }
    outputs.write(&report, store.as_ref())
}

/// One run in the madsim harness under the seed's fault plan.
#[cfg(madsim)]
fn simulate_madsim(scenario: Scenario, outputs: Outputs) -> Result<u8> {
    use nodewright_testkit::sim::faults::FaultPlan;
    use nodewright_testkit::sim::madsim_world::{self, MadsimOptions};
    let plan = FaultPlan::draw(scenario.seed, scenario.duration_ms);
    println!("faults: {plan}");
    let run = madsim_world::run(&scenario, plan, MadsimOptions::default())?;
    let (sent, received, deleted) = run.queue;
    println!(
        "controller restarts: {}; interruption messages: {sent} sent, {received} received, {deleted} deleted",
        run.restarts
    );
    outputs.write(&run.report, Some(&run.log))
}

#[cfg(not(madsim))]
fn simulate_madsim(_: Scenario, _: Outputs) -> Result<u8> {
    Err(not_the_simulated_build())
}

#[cfg(not(madsim))]
fn not_the_simulated_build() -> anyhow::Error {
    anyhow::anyhow!(
        "--madsim: this nodewright is not the simulated build; build it with RUSTFLAGS=\"--cfg madsim\" (for example RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim cargo run --release -- simulate --madsim)"
    )
}

#[cfg(madsim)]
fn madsim_seeds(
    scenario: &Scenario,
    seeds: std::ops::Range<u64>,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<nodewright_testkit::seeds::SeedsOutcome> {
    use nodewright_testkit::seeds;
    Ok(seeds::run_seeds_with(
        scenario,
        seeds,
        threads,
        &seeds::run_one_madsim,
        progress,
    ))
}

#[cfg(not(madsim))]
fn madsim_seeds(
    _: &Scenario,
    _: std::ops::Range<u64>,
    _: usize,
    _: &(dyn Fn(u64) + Sync),
) -> Result<nodewright_testkit::seeds::SeedsOutcome> {
    Err(not_the_simulated_build())
}

/// A progress line on the terminal, rewritten in place.
fn show_progress(now_ms: u64, duration_ms: u64) {
    let share = now_ms as f64 / duration_ms.max(1) as f64;
    let width = 30;
    let done = ((share * width as f64) as usize).min(width);
    eprint!(
        "\r[{}{}] {:5.1}% of {:.0}s simulated",
        "#".repeat(done),
        " ".repeat(width - done),
        share * 100.0,
        duration_ms as f64 / 1000.0
    );
}

/// `FROM..TO`, end excluded.
fn parse_seed_range(text: &str) -> Result<std::ops::Range<u64>> {
    let parsed = text.split_once("..").and_then(|(a, b)| {
        let from: u64 = a.trim().parse().ok()?;
        let to: u64 = b.trim().parse().ok()?;
        Some(from..to)
    });
    match parsed {
        Some(range) if !range.is_empty() => Ok(range),
        _ => anyhow::bail!(
            "--seeds {text:?}: give a range FROM..TO of seeds with FROM < TO, such as 1..200 (TO is excluded)"
        ),
    }
}

fn simulate_seeds(names: &[String], range: &str, madsim: bool) -> Result<u8> {
    let seeds = parse_seed_range(range)?;
    let scenario = load_scenario(names)?;
    let total = seeds.end - seeds.start;
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let progress = |done: u64| {
        if tty {
            eprint!("\r{done}/{total} seeds");
        }
    };
    let outcome = if madsim {
        madsim_seeds(&scenario, seeds.clone(), threads, &progress)?
    } else {
        nodewright_testkit::seeds::run_seeds(&scenario, seeds.clone(), threads, None, &progress)
    };
    if tty {
        eprintln!();
    }
    let seconds = outcome.elapsed.as_secs_f64();
    println!(
        "{} seeds ({}..{}) of {}: {} passed, {} failed; {} events in {:.1}s ({:.0} events/s, {} threads)",
        outcome.runs,
        seeds.start,
        seeds.end,
        scenario.name,
        outcome.runs - outcome.failures.len() as u64,
        outcome.failures.len(),
        outcome.events,
        seconds,
        outcome.events as f64 / seconds.max(1e-9),
        threads
    );
    let shown = if names.is_empty() {
        "seed-tutorial".to_string()
    } else {
        names.join(" ")
    };
    for failure in &outcome.failures {
        println!("--- seed {} failed:", failure.seed);
        for cause in &failure.causes {
            for line in cause.to_string().lines() {
                println!("  {line}");
            }
        }
        if madsim {
            println!(
                "  reproduce: RUSTFLAGS=\"--cfg madsim\" CARGO_TARGET_DIR=target/madsim cargo run --release -- simulate {shown} --madsim --seed {} --report seed-{}.json",
                failure.seed, failure.seed
            );
        } else {
            println!(
                "  reproduce: nodewright simulate {shown} --seed {} --report seed-{}.json",
                failure.seed, failure.seed
            );
        }
    }
    Ok(if outcome.failures.is_empty() {
        0
    } else {
        EXIT_FAILED_CHECK
    })
}

fn describe(commands: &[Command]) -> String {
    if commands.is_empty() {
        return "  (no commands)".to_string();
    }
    commands
        .iter()
        .map(|c| {
            format!(
                "  {}",
                serde_json::to_string(c).unwrap_or_else(|e| format!("<{e}>"))
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn replay(log: &Path, verify: bool, jobs: Option<u32>) -> Result<u8> {
    if !verify {
        anyhow::bail!(
            "say what to do with the log: `nodewright replay {0} --verify`, or `nodewright replay {0} --policy NEW.yaml` for a what-if",
            log.display()
        );
    }
    let tty = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let started = std::time::Instant::now();
    let shown = |p: nodewright_replay::Progress| {
        if !tty {
            return;
        }
        let share = p
            .bytes_total
            .filter(|t| *t > 0)
            .map(|t| format!("{:3.0}% ", 100.0 * p.bytes_read as f64 / t as f64))
            .unwrap_or_default();
        eprint!(
            "\rreplaying {share}{} events, {:.0} events/s",
            p.events,
            p.events as f64 / started.elapsed().as_secs_f64().max(1e-9)
        );
    };
    let jobs = jobs.map_or_else(
        || std::thread::available_parallelism().map_or(1, |n| n.get()),
        |n| n as usize,
    );
    let verified = nodewright_replay::verify_file_in_parts(log, jobs, shown);
    if tty {
        eprint!("\r{:70}\r", "");
    }
    let outcome = match verified {
        Ok(o) => o,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    if let Some(events) = outcome.snapshot_divergence {
        println!(
            "DIVERGENCE in the snapshot after event {events}: every command matched so far, but the replayed core's state differs from the one recorded"
        );
        return Ok(EXIT_FAILED_CHECK);
    }
    match outcome.divergence {
        None => {
            if outcome.snapshots_checked > 0 {
                println!(
                    "{} snapshots of the core hold exactly the replayed state",
                    outcome.snapshots_checked
                );
            }
            if let Some(first) = outcome.started_at_event {
                println!("the log starts at event {first}, from a snapshot of the events before");
            }
            println!(
                "verified {}: {} events, {} commands replay identically (source {}, {})",
                log.display(),
                outcome.events,
                outcome.commands,
                outcome.header.source,
                outcome.header.producer
            );
            println!("decision digest {}", outcome.decision_digest);
            Ok(0)
        }
        Some(d) => {
            println!(
                "DIVERGENCE at event {} (t={}ms, {}):",
                d.event_index,
                d.event.at_ms,
                d.event.kind.name()
            );
            for (i, e) in &d.before {
                println!("  before: event {i} t={}ms {}", e.at_ms, e.kind.name());
            }
            println!("recorded:\n{}", describe(&d.recorded));
            println!("replayed:\n{}", describe(&d.replayed));
            for (i, e) in &d.after {
                println!("  after: event {i} t={}ms {}", e.at_ms, e.kind.name());
            }
            Ok(EXIT_FAILED_CHECK)
        }
    }
}

fn what_if(
    log: &Path,
    policy: &Path,
    report: Option<&Path>,
    what_if_log: Option<&Path>,
) -> Result<u8> {
    use nodewright_testkit::whatif;
    // Everything that can be refused is refused before anything runs.
    let prepared = whatif::Policy::load(policy).and_then(|policy| {
        let recording = whatif::Recording::read(log)?;
        policy.check_against(&recording)?;
        whatif::scenario_of(&recording, &policy)?;
        Ok((policy, recording))
    });
    let (policy, recording) = match prepared {
        Ok(p) => p,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    let (outcome, run_log) = whatif::what_if_logged(&recording, &policy)?;
    if let Some(path) = what_if_log {
        let file =
            File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
        run_log
            .write_nwlog(BufWriter::new(file))
            .with_context(|| format!("cannot write the what-if log {}", path.display()))?;
    }
    print!("{}", outcome.render());
    if let Some(path) = report {
        let json = serde_json::to_string_pretty(&outcome)?;
        std::fs::write(path, json + "\n")
            .with_context(|| format!("writing the what-if report {}", path.display()))?;
    }
    Ok(0)
}

/// `--from`/`--until`: RFC 3339, or a duration from the clock's origin.
fn log_time(flag: &str, text: &str) -> Result<u64, String> {
    if let Ok(t) = humantime::parse_rfc3339_weak(text) {
        return t
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .map_err(|_| format!("{flag} {text:?} is before 1970"));
    }
    nodewright_core::model::duration::parse_duration_ms(text).map_err(|e| {
        format!(
            "{flag} {text:?}: neither an RFC 3339 time (2026-12-01T09:00:00Z) nor a duration from the clock's origin (90m): {e}"
        )
    })
}

/// `--from` and `--until` read, or the message saying which is wrong.
fn log_range(
    from: Option<&str>,
    until: Option<&str>,
) -> Result<(Option<u64>, Option<u64>), String> {
    let parse = |flag: &str, t: Option<&str>| t.map(|t| log_time(flag, t)).transpose();
    let (from_ms, until_ms) = (parse("--from", from)?, parse("--until", until)?);
    if let (Some(f), Some(u)) = (from_ms, until_ms)
        && f >= u
    {
        return Err("--from must come before --until".to_string());
    }
    Ok((from_ms, until_ms))
}

/// How a written log starts, for the line `log export` prints: from a snapshot of the events
/// before the range, or (none before) from the start.
fn starting_text(events_before: u64) -> String {
    if events_before > 0 {
        format!(", starting from a snapshot of the {events_before} events before")
    } else {
        String::new()
    }
}

/// `log export --segments`: the range assembled from sealed segments.
fn assemble_segments(
    source: &str,
    out: &Path,
    from: Option<&str>,
    until: Option<&str>,
) -> Result<u8> {
    let (from_ms, until_ms) = match log_range(from, until) {
        Ok(range) => range,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    let segments = match segments::read(source, from_ms, until_ms) {
        Ok(segments) => segments,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    match nodewright_replay::segments::assemble(&segments, from_ms, until_ms, out) {
        Ok(a) => {
            let start = starting_text(a.events_before);
            println!(
                "wrote {}: {} events, {} commands from {} segments in {} pieces (a piece a store: a leader term){start}",
                out.display(),
                a.events,
                a.commands,
                a.segments,
                a.pieces
            );
            Ok(0)
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(EXIT_BAD_INPUT)
        }
    }
}

fn export(
    store: &Path,
    out: &Path,
    from: Option<&str>,
    until: Option<&str>,
    redact: bool,
) -> Result<u8> {
    let (from_ms, until_ms) = match log_range(from, until) {
        Ok(range) => range,
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    match nodewright_replay::export::export(store, out, from_ms, until_ms, redact) {
        Ok(e) => {
            let start = starting_text(e.events_before);
            let redacted = match e.redacted {
                Some(c) => format!(
                    "; redacted: {} namespaces, {} names, {} label and annotation values replaced by tokens",
                    c.namespaces, c.names, c.values
                ),
                None => String::new(),
            };
            println!(
                "wrote {}: {} events, {} commands{start}{redacted}",
                out.display(),
                e.events,
                e.commands
            );
            Ok(0)
        }
        Err(nodewright_replay::export::ExportError::Log(err)) if err.is_store_in_use() => {
            eprintln!(
                "error: {err}\n\
                 a running controller holds this store; take the log from the leader instead:\n  \
                 kubectl port-forward -n <namespace> <leader pod> 8082 &\n  \
                 curl -H \"Authorization: Bearer $(kubectl create token -n <namespace> <reader>)\" \
                 -o incident.nwlog 'http://localhost:8082/log?from=...&until=...&redact=true'\n\
                 (the leader is the Lease's holderIdentity: kubectl get lease -n <namespace> \
                 <release>-leader-election; the reader is bound to the ClusterRole \
                 <release>-log-reader or <release>-log-reader-redacted; docs/install.md)"
            );
            Ok(EXIT_BAD_INPUT)
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(EXIT_BAD_INPUT)
        }
    }
}

fn explain(log: &Path, subject: &nodewright_replay::Subject) -> Result<u8> {
    match nodewright_replay::explain_file(log, subject) {
        Ok(story) => {
            print!("{}", story.render());
            Ok(0)
        }
        Err(err) => {
            eprintln!("error: {err}");
            Ok(EXIT_BAD_INPUT)
        }
    }
}

fn repair(log: &Path, out: &Path) -> Result<u8> {
    let repaired = match nodewright_replay::repair::repair(log, out) {
        Ok(r) => r,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    match &repaired.damage {
        None => println!(
            "{}: the log is intact; copied its {} records ({} events) to {}",
            log.display(),
            repaired.records,
            repaired.events,
            out.display()
        ),
        Some(damage) => {
            println!("damage: {damage}");
            println!(
                "kept the intact prefix, {} records ({} events), in {}{}",
                repaired.records,
                repaired.events,
                out.display(),
                if repaired.dropped_last_event {
                    "; the last intact event is left out: its commands may have been in the damaged frame"
                } else {
                    ""
                }
            );
            println!("check it: nodewright replay {} --verify", out.display());
        }
    }
    Ok(0)
}

fn inspect(log: &Path) -> Result<u8> {
    let summary = match nodewright_replay::inspect_file(log) {
        Ok(s) => s,
        Err(err) => {
            eprintln!("error: {err}");
            return Ok(EXIT_BAD_INPUT);
        }
    };
    println!(
        "{}: nwlog format version {}, {} bytes",
        log.display(),
        summary.format_version,
        summary.bytes
    );
    println!(
        "written by {} from {}",
        summary.header.producer, summary.header.source
    );
    match (summary.first_event_ms, summary.last_event_ms) {
        (Some(a), Some(b)) => println!(
            "time range {:.3}s .. {:.3}s",
            a as f64 / 1000.0,
            b as f64 / 1000.0
        ),
        _ => println!("no events"),
    }
    println!(
        "{} events, {:.0} bytes each on average (the catalog's aside):",
        summary.events,
        summary.mean_event_bytes()
    );
    for (kind, n) in &summary.events_by_kind {
        let bytes = summary.event_bytes_by_kind.get(kind).copied().unwrap_or(0);
        println!(
            "  {kind:<22} {n:>9} {:>12} bytes {:>8.0} each",
            bytes,
            bytes as f64 / (*n).max(1) as f64
        );
    }
    println!(
        "{} commands, in {} bytes:",
        summary.commands, summary.command_bytes
    );
    for (kind, n) in &summary.commands_by_kind {
        let bytes = summary
            .command_bytes_by_kind
            .get(kind)
            .copied()
            .unwrap_or(0);
        println!(
            "  {kind:<22} {n:>9} {:>12} bytes {:>8.0} each",
            bytes,
            bytes as f64 / (*n).max(1) as f64
        );
    }
    if summary.snapshots > 0 {
        println!(
            "{} snapshots of the core, {} bytes",
            summary.snapshots, summary.snapshot_bytes
        );
    }
    if summary.pieces_after_first > 0 {
        println!(
            "assembled from {} pieces ({} of them going on from the piece before, in the same store)",
            summary.pieces_after_first + 1,
            summary.pieces_continuing
        );
    }
    Ok(0)
}

/// Peak resident memory of this process in bytes (Linux `VmHWM`), if known.
fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

fn bench_scheduling(pods: usize, preferences: bool, ignore: bool, json: bool) -> Result<u8> {
    use nodewright_core::config::PreferencePolicy;
    use nodewright_testkit::bench::{self, Case};
    if ignore && !preferences {
        anyhow::bail!("--ignore-preferences goes with --preferences");
    }
    let case = if preferences {
        Case::Preferences(if ignore {
            PreferencePolicy::Ignore
        } else {
            PreferencePolicy::Respect
        })
    } else {
        Case::Mix
    };
    let report = bench::run(case, pods);
    let peak = peak_rss_bytes();
    if json {
        let mut value = serde_json::to_value(&report)?;
        if let (Some(obj), Some(peak)) = (value.as_object_mut(), peak) {
            obj.insert("peak_rss_bytes".to_string(), serde_json::Value::from(peak));
        }
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!("{}", report.text());
        if let Some(peak) = peak {
            println!("peak resident memory {:.1} MB", peak as f64 / 1e6);
        }
    }
    Ok(if report.unschedulable == 0 {
        0
    } else {
        EXIT_FAILED_CHECK
    })
}
