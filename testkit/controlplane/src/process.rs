//! The control plane's child processes: started with stdout and stderr in one log file each,
//! watched for early exits, killed and reaped on drop, newest first.

use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::error::{self, Error};

/// How many log lines an error or a failed test shows per process.
pub(crate) const TAIL_LINES: usize = 30;

/// One running component.
#[derive(Debug)]
pub(crate) struct Process {
    /// Which binary it is, e.g. `kube-apiserver`.
    pub(crate) name: &'static str,
    /// Its log file: stdout and stderr.
    pub(crate) log: PathBuf,
    /// `None` once stopped.
    child: Option<Child>,
}

impl Process {
    /// Starts `program` with `args` in `cwd`, its output going to `<log_dir>/<name>.log`.
    pub(crate) fn spawn(
        name: &'static str,
        program: &Path,
        args: &[String],
        cwd: &Path,
        log_dir: &Path,
    ) -> Result<Process, Error> {
        let log = log_dir.join(format!("{name}.log"));
        let stdout = File::create(&log).map_err(error::io(format!("create {}", log.display())))?;
        // One open file for both streams, so their lines interleave in order.
        let stderr = stdout
            .try_clone()
            .map_err(error::io(format!("reopen {}", log.display())))?;
        let child = Command::new(program)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .map_err(|source| Error::Spawn {
                binary: name,
                program: program.to_owned(),
                source,
            })?;
        Ok(Process {
            name,
            log,
            child: Some(child),
        })
    }

    /// Fails with the end of the log if the process has exited; `step` says what the fixture
    /// was doing.
    pub(crate) fn ensure_running(&mut self, step: &'static str) -> Result<(), Error> {
        let Some(child) = self.child.as_mut() else {
            return Ok(());
        };
        let status = child
            .try_wait()
            .map_err(error::io(format!("check whether {} is running", self.name)))?;
        match status {
            None => Ok(()),
            Some(status) => Err(Error::Exited {
                binary: self.name,
                step,
                status,
                log: self.log.clone(),
                tail: tail(&self.log, TAIL_LINES),
            }),
        }
    }

    /// Its process id, while it runs.
    pub(crate) fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process (SIGKILL: its state is thrown away anyway) and reaps it.
    pub(crate) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // Errors mean it has already exited (and `wait` then reaps it or was done).
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The running components in start order; stops them newest first on drop.
#[derive(Debug, Default)]
pub(crate) struct Processes(pub(crate) Vec<Process>);

impl Processes {
    /// Stops every process, the last started first.
    pub(crate) fn stop_all(&mut self) {
        for process in self.0.iter_mut().rev() {
            process.stop();
        }
    }

    /// The error for a readiness check of `binary` that timed out, with the end of its log.
    pub(crate) fn not_ready(
        &self,
        binary: &'static str,
        step: &'static str,
        timeout: Duration,
        problem: String,
    ) -> Error {
        let (log, tail) = match self.0.iter().find(|p| p.name == binary) {
            Some(process) => (process.log.clone(), tail(&process.log, TAIL_LINES)),
            None => (PathBuf::new(), format!("({binary} was not started)")),
        };
        Error::NotReady {
            binary,
            step,
            timeout,
            problem,
            log,
            tail,
        }
    }

    /// Fails if any process has exited.
    pub(crate) fn ensure_running(&mut self, step: &'static str) -> Result<(), Error> {
        self.0.iter_mut().try_for_each(|p| p.ensure_running(step))
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        self.stop_all();
    }
}

/// The last `lines` lines of a log file, or a note saying why it could not be read.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let all: Vec<&str> = text.lines().collect();
            let start = all.len().saturating_sub(lines);
            if all.is_empty() {
                "(the log is empty)".to_owned()
            } else {
                all[start..].join("\n")
            }
        }
        Err(e) => format!("(could not read {}: {e})", path.display()),
    }
}

/// `n` distinct free TCP ports on 127.0.0.1. They are held together while chosen so that
/// they differ, then released for the components to bind; another process could take one in
/// between, which the kernel's port allocation makes unlikely.
pub(crate) fn free_ports<const N: usize>() -> Result<[u16; N], Error> {
    let mut listeners = Vec::with_capacity(N);
    let mut ports = [0; N];
    for port in &mut ports {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(error::io("bind a free port on 127.0.0.1"))?;
        *port = listener
            .local_addr()
            .map_err(error::io("read the address of a bound port"))?
            .port();
        listeners.push(listener);
    }
    Ok(ports)
}
