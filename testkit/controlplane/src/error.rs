//! What can go wrong while starting or using the control plane, each naming the step and the
//! binary involved and saying what to do about it.

use std::fmt;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

/// A failure of the control-plane fixture.
///
/// `Debug` prints the same text as `Display`, so that
/// `ControlPlane::start().await.expect(..)` in a test shows a readable message with the
/// log lines rather than an escaped struct.
#[derive(thiserror::Error)]
pub enum Error {
    /// `build.sh` failed and `go`, which it needs, is not on `PATH`.
    #[error(
        "the control-plane binaries are not built and `go` is not on PATH, so {script} cannot \
         build them; install Go (see testkit/controlplane/README.md), or set \
         NODEWRIGHT_CONTROLPLANE_BIN to a folder holding {binaries}"
    )]
    GoMissing {
        /// The build script.
        script: PathBuf,
        /// The binaries the folder must hold.
        binaries: String,
    },

    /// `build.sh` could not be run or failed.
    #[error(
        "{script} failed ({status}); its output is above. Run it by hand to see why, or set \
         NODEWRIGHT_CONTROLPLANE_BIN to a folder holding the binaries"
    )]
    BuildFailed {
        /// The build script.
        script: PathBuf,
        /// How it ended.
        status: String,
    },

    /// A binary is not where it should be.
    #[error("{binary} is missing: {path} does not exist or is not a file; {hint}")]
    BinaryMissing {
        /// The missing binary.
        binary: &'static str,
        /// Where it was looked for.
        path: PathBuf,
        /// What to do about it.
        hint: String,
    },

    /// A kwok stage file is not where it should be.
    #[error("the kwok stage file {path} is missing (kwok does nothing without its stages); {hint}")]
    StageMissing {
        /// Where it was looked for.
        path: PathBuf,
        /// What to do about it.
        hint: String,
    },

    /// A file-system or socket operation failed.
    #[error("could not {action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A certificate or key could not be generated.
    #[error("could not generate {what}: {source}")]
    Certificate {
        /// Which certificate or key.
        what: &'static str,
        /// The underlying error.
        #[source]
        source: rcgen::Error,
    },

    /// A process could not be started.
    #[error("could not start {binary} ({program}): {source}")]
    Spawn {
        /// Which component.
        binary: &'static str,
        /// The executable.
        program: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A process ended while it should have been running.
    #[error("{binary} exited {status} while {step}; last lines of {log}:\n{tail}")]
    Exited {
        /// Which component.
        binary: &'static str,
        /// What the fixture was doing at the time.
        step: &'static str,
        /// How it ended.
        status: ExitStatus,
        /// Its log file (kept).
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },

    /// A component did not become ready in time.
    #[error(
        "{binary} was not ready after {timeout:?} while {step} (last problem: {problem}); last \
         lines of {log}:\n{tail}"
    )]
    NotReady {
        /// Which component.
        binary: &'static str,
        /// What the fixture was waiting for.
        step: &'static str,
        /// How long it waited.
        timeout: Duration,
        /// The last reason the check failed.
        problem: String,
        /// Its log file (kept).
        log: PathBuf,
        /// The end of its log.
        tail: String,
    },

    /// nodewright's CRDs were applied but are not served.
    #[error("nodewright's CRDs were not served after {timeout:?} (last problem: {problem})")]
    CrdsNotServed {
        /// How long it waited.
        timeout: Duration,
        /// The last reason the check failed.
        problem: String,
    },

    /// The admin kubeconfig could not be turned into a client configuration.
    #[error("could not read the kubeconfig {path}: {source}")]
    Kubeconfig {
        /// The kubeconfig file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: kube::config::KubeconfigError,
    },

    /// A request to the API server failed.
    #[error("could not {action}: {source}")]
    Api {
        /// What was being done.
        action: String,
        /// The underlying error.
        #[source]
        source: kube::Error,
    },
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Every variant's message already includes its cause.
        write!(f, "{self}")
    }
}

/// Wraps an `io::Error` with what was being done.
pub(crate) fn io(action: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
    let action = action.into();
    move |source| Error::Io { action, source }
}

impl Error {
    /// Whether a component stopped because a port it was given was taken: the ports are free
    /// when chosen, and another process may bind one before the component does.
    pub fn is_port_taken(&self) -> bool {
        matches!(self, Error::Exited { tail, .. } if tail.contains("address already in use"))
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::process::ExitStatusExt;

    use super::*;

    fn exited(tail: &str) -> Error {
        Error::Exited {
            binary: "kube-apiserver",
            step: "waiting for kube-apiserver's /readyz",
            status: ExitStatus::from_raw(256),
            log: PathBuf::from("kube-apiserver.log"),
            tail: tail.to_owned(),
        }
    }

    #[test]
    fn only_a_bind_to_a_taken_port_is_a_port_taken() {
        assert!(exited("failed to listen on 127.0.0.1:35443: listen tcp 127.0.0.1:35443: bind: address already in use").is_port_taken());
        assert!(!exited("unknown flag: --nope").is_port_taken());
    }
}
