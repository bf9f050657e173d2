//! Finding the control-plane binaries and kwok's stage files: from
//! `NODEWRIGHT_CONTROLPLANE_BIN` when set, else from `build.sh`, which builds them once into a
//! cache and prints the folder.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::error::{self, Error};

/// The environment variable naming a folder that already holds the binaries.
pub const BIN_ENV: &str = "NODEWRIGHT_CONTROLPLANE_BIN";

/// The binaries the fixture runs, in start order, helm and toxiproxy-server.
pub(crate) const BINARIES: [&str; 7] = [
    ETCD,
    KUBE_APISERVER,
    KUBE_CONTROLLER_MANAGER,
    KUBE_SCHEDULER,
    KWOK,
    HELM,
    TOXIPROXY,
];
pub(crate) const ETCD: &str = "etcd";
pub(crate) const KUBE_APISERVER: &str = "kube-apiserver";
pub(crate) const KUBE_CONTROLLER_MANAGER: &str = "kube-controller-manager";
pub(crate) const KUBE_SCHEDULER: &str = "kube-scheduler";
pub(crate) const KWOK: &str = "kwok";
/// For the chart's tests.
pub(crate) const HELM: &str = "helm";
/// For the fault tests: a TCP proxy whose faults a test sets.
pub(crate) const TOXIPROXY: &str = "toxiproxy-server";

/// kwok's stages, copied by `build.sh` into `kwok-stages/` next to `bin/`.
const STAGES: [&str; 5] = [
    "node-initialize.yaml",
    "node-heartbeat.yaml",
    "pod-ready.yaml",
    "pod-complete.yaml",
    "pod-delete.yaml",
];

/// The located binaries and stage files, all checked to exist.
#[derive(Debug, Clone)]
pub(crate) struct Binaries {
    dir: PathBuf,
    /// kwok's stage files, one `--config` each.
    pub(crate) stages: Vec<PathBuf>,
}

impl Binaries {
    /// The path of one of [`BINARIES`].
    pub(crate) fn path(&self, binary: &str) -> PathBuf {
        self.dir.join(binary)
    }
}

fn build_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("build.sh")
}

/// Finds the binaries: `NODEWRIGHT_CONTROLPLANE_BIN` if set, else the folder `build.sh`
/// prints last (building them first if needed; its progress goes to stderr).
pub(crate) async fn locate() -> Result<Binaries, Error> {
    if let Some(dir) = std::env::var_os(BIN_ENV).filter(|d| !d.is_empty()) {
        let hint = format!(
            "{BIN_ENV} is set to {}; point it at the bin folder printed by \
             testkit/controlplane/build.sh, or unset it to build the binaries automatically",
            Path::new(&dir).display()
        );
        return check(PathBuf::from(dir), &hint);
    }
    let dir = tokio::task::spawn_blocking(run_build_script)
        .await
        .map_err(|join| Error::BuildFailed {
            script: build_script(),
            status: format!("the thread running it failed: {join}"),
        })??;
    let hint = format!(
        "{} printed {} but it is incomplete; delete that folder and run the script again",
        build_script().display(),
        dir.display()
    );
    check(dir, &hint)
}

/// Runs `build.sh` (blocking: the first build takes minutes) and returns the last line of its
/// stdout. Its stderr, the build's progress, goes to ours.
fn run_build_script() -> Result<PathBuf, Error> {
    let script = build_script();
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .output()
        .map_err(error::io(format!("run {} with bash", script.display())))?;
    if !output.status.success() {
        if !on_path("go") {
            return Err(Error::GoMissing {
                script,
                binaries: BINARIES.join(", "),
            });
        }
        return Err(Error::BuildFailed {
            script,
            status: output.status.to_string(),
        });
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    match stdout.lines().map(str::trim).rfind(|l| !l.is_empty()) {
        Some(last) => Ok(PathBuf::from(last)),
        None => Err(Error::BuildFailed {
            script,
            status: "it succeeded but printed no bin folder on stdout".to_owned(),
        }),
    }
}

/// Whether an executable named `program` is in a folder of `PATH`.
fn on_path(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join(program).is_file()))
}

/// Checks that every binary and stage file exists.
fn check(dir: PathBuf, hint: &str) -> Result<Binaries, Error> {
    for binary in BINARIES {
        let path = dir.join(binary);
        if !path.is_file() {
            return Err(Error::BinaryMissing {
                binary,
                path,
                hint: hint.to_owned(),
            });
        }
    }
    let stage_dir = dir
        .parent()
        .unwrap_or_else(|| Path::new("/"))
        .join("kwok-stages");
    let mut stages = Vec::with_capacity(STAGES.len());
    for stage in STAGES {
        let path = stage_dir.join(stage);
        if !path.is_file() {
            return Err(Error::StageMissing {
                path,
                hint: format!("the stages live in kwok-stages/ next to the bin folder; {hint}"),
            });
        }
        stages.push(path);
    }
    Ok(Binaries { dir, stages })
}
