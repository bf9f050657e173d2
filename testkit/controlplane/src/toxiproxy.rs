//! Toxiproxy (`github.com/Shopify/toxiproxy/v2`, built by `build.sh` from Go modules): a TCP
//! proxy between a component and a service it talks to, whose faults a test sets and lifts
//! through toxiproxy's HTTP API — latency and jitter, connections reset, bandwidth cut, data
//! stopped, the service gone (the proxy disabled: connections closed, new ones refused).
//!
//! ```no_run
//! # async fn example() -> Result<(), nodewright_controlplane::Error> {
//! use nodewright_controlplane::{Toxic, Toxiproxy};
//!
//! let toxiproxy = Toxiproxy::start().await?;
//! let through = toxiproxy.proxy("moto", "127.0.0.1:5000".parse().unwrap()).await?;
//! // ... point the component at `through` ...
//! toxiproxy.add("moto", Toxic::Latency { ms: 300, jitter_ms: 200 }).await?;
//! toxiproxy.set_enabled("moto", false).await?; // moto is gone
//! toxiproxy.set_enabled("moto", true).await?;
//! toxiproxy.clear("moto").await?;
//! # Ok(())
//! # }
//! ```

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::binaries::{self, TOXIPROXY};
use crate::error::{self, Error};
use crate::process::{self, Process, TAIL_LINES};

/// How long toxiproxy-server may take to answer its API.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// A fault, on the data flowing both ways through a proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Toxic {
    /// Each chunk of data waits `ms`, give or take `jitter_ms`.
    Latency { ms: u64, jitter_ms: u64 },
    /// Connections are reset (TCP RST) `after_ms` after they open (0: at once).
    ResetPeer { after_ms: u64 },
    /// At most `kb_per_second` KB/s.
    Bandwidth { kb_per_second: u64 },
    /// No data goes through; the connection is closed after `ms` (0: never).
    Timeout { ms: u64 },
}

impl Toxic {
    fn name(&self) -> &'static str {
        match self {
            Toxic::Latency { .. } => "latency",
            Toxic::ResetPeer { .. } => "reset_peer",
            Toxic::Bandwidth { .. } => "bandwidth",
            Toxic::Timeout { .. } => "timeout",
        }
    }

    fn attributes(&self) -> serde_json::Value {
        match *self {
            Toxic::Latency { ms, jitter_ms } => json!({ "latency": ms, "jitter": jitter_ms }),
            Toxic::ResetPeer { after_ms } => json!({ "timeout": after_ms }),
            Toxic::Bandwidth { kb_per_second } => json!({ "rate": kb_per_second }),
            Toxic::Timeout { ms } => json!({ "timeout": ms }),
        }
    }
}

/// A running toxiproxy-server; dropping it kills the process.
pub struct Toxiproxy {
    api: SocketAddr,
    process: Process,
    _dir: tempfile::TempDir,
}

impl Toxiproxy {
    /// Starts toxiproxy-server on a free loopback port and waits until its API answers.
    pub async fn start() -> Result<Toxiproxy, Error> {
        let binaries = binaries::locate().await?;
        let dir = tempfile::Builder::new()
            .prefix("nodewright-toxiproxy-")
            .tempdir()
            .map_err(error::io("create a temporary folder for toxiproxy"))?;
        let [port] = process::free_ports::<1>()?;
        let mut process = Process::spawn(
            TOXIPROXY,
            &binaries.path(TOXIPROXY),
            &[
                "-host".into(),
                Ipv4Addr::LOCALHOST.to_string(),
                "-port".into(),
                port.to_string(),
            ],
            dir.path(),
            dir.path(),
        )?;
        let api = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let since = Instant::now();
        loop {
            process.ensure_running("start toxiproxy-server")?;
            if request(api, "GET", "/version", None).await.is_ok() {
                break;
            }
            if since.elapsed() > START_TIMEOUT {
                return Err(Error::NotReady {
                    binary: TOXIPROXY,
                    step: "wait for toxiproxy's API",
                    timeout: START_TIMEOUT,
                    problem: format!("{api} does not answer GET /version"),
                    log: process.log.clone(),
                    tail: process::tail(&process.log, TAIL_LINES),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(Toxiproxy {
            api,
            process,
            _dir: dir,
        })
    }

    /// A proxy named `name` to `upstream`, listening on a free loopback port it returns.
    pub async fn proxy(&self, name: &str, upstream: SocketAddr) -> Result<SocketAddr, Error> {
        let [port] = process::free_ports::<1>()?;
        let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let body = json!({
            "name": name,
            "listen": listen.to_string(),
            "upstream": upstream.to_string(),
            "enabled": true,
        });
        self.call("POST", "/proxies", Some(body)).await?;
        Ok(listen)
    }

    /// Adds `toxic` to both directions of proxy `name`.
    pub async fn add(&self, name: &str, toxic: Toxic) -> Result<(), Error> {
        for stream in ["upstream", "downstream"] {
            let body = json!({
                "name": format!("{}_{stream}", toxic.name()),
                "type": toxic.name(),
                "stream": stream,
                "toxicity": 1.0,
                "attributes": toxic.attributes(),
            });
            self.call("POST", &format!("/proxies/{name}/toxics"), Some(body))
                .await?;
        }
        Ok(())
    }

    /// Removes every toxic of proxy `name`.
    pub async fn clear(&self, name: &str) -> Result<(), Error> {
        let listed = self
            .call("GET", &format!("/proxies/{name}/toxics"), None)
            .await?;
        let toxics: Vec<serde_json::Value> = serde_json::from_str(&listed).unwrap_or_default();
        for toxic in toxics {
            if let Some(toxic) = toxic.get("name").and_then(|n| n.as_str()) {
                self.call("DELETE", &format!("/proxies/{name}/toxics/{toxic}"), None)
                    .await?;
            }
        }
        Ok(())
    }

    /// Enables or disables proxy `name`: disabled, its connections are closed and new ones
    /// refused, as when the service is gone.
    pub async fn set_enabled(&self, name: &str, enabled: bool) -> Result<(), Error> {
        self.call(
            "POST",
            &format!("/proxies/{name}"),
            Some(json!({ "enabled": enabled })),
        )
        .await
        .map(drop)
    }

    /// The end of toxiproxy-server's log.
    pub fn log_tail(&self) -> String {
        process::tail(&self.process.log, TAIL_LINES)
    }

    async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<serde_json::Value>,
    ) -> Result<String, Error> {
        let action = || format!("{method} {path} on toxiproxy's API");
        match request(self.api, method, path, body).await {
            Ok((status, body)) if (200..300).contains(&status) => Ok(body),
            Ok((status, body)) => Err(error::io(action())(std::io::Error::other(format!(
                "it answered {status}: {body}"
            )))),
            Err(e) => Err(error::io(action())(e)),
        }
    }
}

/// One HTTP/1.0 request to toxiproxy's API: the status and the body.
async fn request(
    api: SocketAddr,
    method: &str,
    path: &str,
    body: Option<serde_json::Value>,
) -> std::io::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(api).await?;
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: {api}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).await?;
    let text = String::from_utf8_lossy(&response);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("not an HTTP answer: {head}")))?;
    Ok((status, body.to_string()))
}
