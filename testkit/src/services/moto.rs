//! The moto server (PyPI `moto[server]`): a real HTTP server speaking EC2's and SQS's APIs,
//! started on a free loopback port for one test and stopped when the handle is dropped.
//!
//! The binary is `$NODEWRIGHT_MOTO_SERVER` when set (`.ci/test` installs moto into a
//! virtualenv outside the clone and sets it), else `moto_server` on the `PATH`. A test that
//! cannot find it fails, saying how to install it: it is never skipped.

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running moto server.
pub struct Moto {
    child: Child,
    port: u16,
    log: PathBuf,
}

fn binary() -> PathBuf {
    std::env::var_os("NODEWRIGHT_MOTO_SERVER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("moto_server"))
}

fn free_port() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind a free local port");
    listener.local_addr().expect("local address").port()
}

impl Moto {
    /// Starts a server and waits until it answers (at most 60 s).
    pub fn start() -> Moto {
        let port = free_port();
        let log = std::env::temp_dir().join(format!("nodewright-moto-{port}.log"));
        let out = std::fs::File::create(&log).expect("create the moto log file");
        let err = out.try_clone().expect("clone the moto log file");
        let child = Command::new(binary())
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "cannot start the moto server ({}: {e}); install it with `pip install \"moto[server]\"` or run the tests through .ci/test, which does",
                    binary().display()
                )
            });
        let moto = Moto { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        while Instant::now() < deadline {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return moto;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        panic!(
            "the moto server did not answer on port {port} within 60 s; its log:\n{}",
            moto.log_text()
        );
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// What the server printed.
    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!(
                "--- moto server log ({}) ---\n{}",
                self.log.display(),
                self.log_text()
            );
        }
        let _ = std::fs::remove_file(&self.log);
    }
}
