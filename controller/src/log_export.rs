//! `GET /log` on the log port (`LOG_PORT`, 8082): the leader's event store as a portable
//! `.nwlog`, while it runs. Another process cannot open the store while the leader has it (redb
//! locks the file), so `nodewright log export` works only on a stopped controller's store; this
//! is the same export, made in the leader's process through a reader that shares the open file.
//!
//! `from` and `until` (RFC 3339) cut a time range; `redact=true` replaces names and values by
//! tokens, as `nodewright log export --redact` does. Only callers the API server allows are
//! served ([`crate::log_access`]), the redacted log to those allowed no more; one export runs
//! at a time (another asker is told to come back: 429); the export is written to a file beside
//! the store and streamed from it in chunks, never held in memory whole. The port is not in
//! the chart's Service, and its NetworkPolicy admits no one to it: the log is taken with
//! `kubectl port-forward` to the leader's pod.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, StreamBody, combinators::BoxBody};
use hyper::body::Frame;
use hyper::{Response, StatusCode};
use k8s_openapi::jiff::Timestamp;
use nodewright_replay::export::{ExportError, export_store};
use tokio::io::AsyncReadExt;
use tracing::{info, warn};

use nodewright_adapters::eventlog::{LogHeader, LogRecord, RedbStore};

/// The controller's event store.
type Store = RedbStore<LogHeader, LogRecord>;

/// A response's body: a short text, or an export streamed from its file.
pub type Body = BoxBody<Bytes, std::io::Error>;

/// How much of an export is read and sent at a time.
const CHUNK: usize = 64 * 1024;

/// What `/log` exports: a reader of the leader's store, while it leads.
#[derive(Clone)]
pub struct LogExports {
    reader: Arc<Mutex<Option<Store>>>,
    exports: Arc<AtomicU64>,
    /// Who may take the log; until it is set (the controller is still connecting), no one.
    gate: Arc<OnceLock<crate::log_access::LogGate>>,
    /// One export at a time.
    busy: Arc<tokio::sync::Semaphore>,
}

/// Withdraws the reader when dropped: the store file must close before the lease goes, so that
/// the next leader can open it.
pub struct Offered(LogExports);

impl Drop for Offered {
    fn drop(&mut self) {
        if let Ok(mut reader) = self.0.reader.lock() {
            *reader = None;
        }
    }
}

/// What a request asks for.
#[derive(Debug, PartialEq, Eq)]
struct Asked {
    from_ms: Option<u64>,
    until_ms: Option<u64>,
    redact: bool,
}

fn parse_time(key: &str, value: &str) -> Result<u64, String> {
    Timestamp::from_str(value)
        .ok()
        .and_then(|t| u64::try_from(t.as_millisecond()).ok())
        .ok_or_else(|| {
            format!("{key}={value:?} is not an RFC 3339 time; fix: {key}=2026-12-01T09:00:00Z")
        })
}

/// The query string of `GET /log`; the error names the parameter and the fix.
fn parse_query(query: Option<&str>) -> Result<Asked, String> {
    let mut asked = Asked {
        from_ms: None,
        until_ms: None,
        redact: false,
    };
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "from" => asked.from_ms = Some(parse_time(key, value)?),
            "until" => asked.until_ms = Some(parse_time(key, value)?),
            "redact" => {
                asked.redact = match value {
                    "" | "true" => true,
                    "false" => false,
                    other => {
                        return Err(format!(
                            "redact={other:?} is not true or false; fix: redact=true"
                        ));
                    }
                }
            }
            other => {
                return Err(format!(
                    "unknown parameter {other:?}; /log takes from, until (RFC 3339) and redact=true"
                ));
            }
        }
    }
    Ok(asked)
}

/// A short text answer.
pub fn text(status: StatusCode, body: String) -> Response<Body> {
    let body = Full::new(Bytes::from(body))
        .map_err(|never| match never {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response
}

/// The file's bytes, `CHUNK` at a time; the file is unlinked already (open, it reads on).
fn streamed(file: tokio::fs::File) -> Body {
    let chunks = futures::stream::unfold(Some(file), |file| async move {
        let mut file = file?;
        let mut buffer = vec![0u8; CHUNK];
        match file.read(&mut buffer).await {
            Ok(0) => None,
            Ok(n) => {
                buffer.truncate(n);
                Some((Ok(Frame::data(Bytes::from(buffer))), Some(file)))
            }
            Err(e) => Some((Err(e), None)),
        }
    });
    StreamBody::new(chunks).boxed()
}

impl Default for LogExports {
    fn default() -> Self {
        LogExports::new()
    }
}

impl LogExports {
    /// Exports served to the callers a gate allows, once it is given ([`LogExports::guard`]).
    pub fn new() -> Self {
        LogExports {
            reader: Arc::default(),
            exports: Arc::default(),
            gate: Arc::default(),
            busy: Arc::new(tokio::sync::Semaphore::new(1)),
        }
    }

    /// From now on, callers are asked about through `gate`.
    pub fn guard(&self, gate: crate::log_access::LogGate) {
        let _ = self.gate.set(gate);
    }

    /// Serves exports from `reader` until the returned guard is dropped.
    pub fn offer(&self, reader: Store) -> Offered {
        if let Ok(mut slot) = self.reader.lock() {
            *slot = Some(reader);
        }
        Offered(self.clone())
    }

    /// The answer to `GET /log?<query>` from the caller whose `Authorization` header is
    /// `authorization`.
    pub async fn answer(&self, query: Option<&str>, authorization: Option<&str>) -> Response<Body> {
        let mut asked = match parse_query(query) {
            Ok(asked) => asked,
            Err(message) => return text(StatusCode::BAD_REQUEST, format!("{message}\n")),
        };
        let Some(gate) = self.gate.get() else {
            return text(
                StatusCode::SERVICE_UNAVAILABLE,
                "the controller is still connecting to the API server, which says who may read the log\n".into(),
            );
        };
        match gate.admit(authorization).await {
            Ok(crate::log_access::Access::Whole) => {}
            Ok(crate::log_access::Access::Redacted) => asked.redact = true,
            Err(refused) => {
                warn!(error = %refused, "a request for the log was refused");
                let status =
                    StatusCode::from_u16(refused.status()).unwrap_or(StatusCode::FORBIDDEN);
                return text(status, format!("{refused}\n"));
            }
        }
        // One export at a time: each replays and writes the store once.
        let Ok(_permit) = self.busy.try_acquire() else {
            let mut response = text(
                StatusCode::TOO_MANY_REQUESTS,
                "another export of the log is under way; ask again when it is done\n".into(),
            );
            response.headers_mut().insert(
                hyper::header::RETRY_AFTER,
                hyper::header::HeaderValue::from_static("10"),
            );
            return response;
        };
        // A reader made now sees every record committed so far.
        let reader = match self
            .reader
            .lock()
            .map(|slot| slot.as_ref().map(Store::reader))
        {
            Ok(Some(Ok(reader))) => reader,
            Ok(None) => {
                return text(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "this replica does not hold the event store (a standby, or starting): ask \
                     the leader, the pod named by the Lease's holderIdentity \
                     (kubectl get lease -n <namespace> <release>-leader-election)\n"
                        .into(),
                );
            }
            Ok(Some(Err(e))) => return text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
            Err(_) => {
                return text(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the store's reader was poisoned by a panic\n".into(),
                );
            }
        };
        let n = self.exports.fetch_add(1, Ordering::Relaxed);
        let out: PathBuf = reader
            .path()
            .with_file_name(format!(".export-{}-{n}.nwlog", std::process::id()));
        let redact = asked.redact;
        let exported = tokio::task::spawn_blocking(move || {
            let exported = export_store(&reader, &out, asked.from_ms, asked.until_ms, asked.redact)
                .and_then(|exported| {
                    // Opened, then unlinked: the stream reads on, and nothing is left behind.
                    let file = std::fs::File::open(&out).map_err(|source| {
                        ExportError::Log(nodewright_adapters::eventlog::LogError::Io {
                            path: Some(out.clone()),
                            action: "read the export back",
                            source,
                        })
                    });
                    file.map(|file| (exported, file))
                });
            let _ = std::fs::remove_file(&out);
            exported
        })
        .await;
        match exported {
            Ok(Ok((exported, file))) => {
                let bytes = file.metadata().map(|m| m.len()).unwrap_or(0);
                info!(
                    events = exported.events,
                    commands = exported.commands,
                    bytes,
                    redacted = redact,
                    "the log was exported over /log"
                );
                let mut response = Response::new(streamed(tokio::fs::File::from_std(file)));
                let headers = response.headers_mut();
                headers.insert(
                    hyper::header::CONTENT_TYPE,
                    hyper::header::HeaderValue::from_static("application/octet-stream"),
                );
                headers.insert(
                    hyper::header::CONTENT_DISPOSITION,
                    hyper::header::HeaderValue::from_static(
                        "attachment; filename=\"nodewright.nwlog\"",
                    ),
                );
                if redact {
                    headers.insert(
                        "x-nodewright-redacted",
                        hyper::header::HeaderValue::from_static("true"),
                    );
                }
                response
            }
            Ok(Err(ExportError::Empty(range))) => text(
                StatusCode::NOT_FOUND,
                format!("no event in {range}; fix: widen from/until\n"),
            ),
            Ok(Err(e)) => {
                warn!(error = %e, "an export over /log failed");
                text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n"))
            }
            Err(e) => text(StatusCode::INTERNAL_SERVER_ERROR, format!("{e}\n")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_names_what_it_cannot_read() {
        assert_eq!(
            parse_query(Some("from=2026-12-01T09:00:00Z&redact=true")),
            Ok(Asked {
                from_ms: Some(1_796_115_600_000),
                until_ms: None,
                redact: true,
            })
        );
        assert_eq!(
            parse_query(None),
            Ok(Asked {
                from_ms: None,
                until_ms: None,
                redact: false
            })
        );
        let error = parse_query(Some("until=yesterday")).unwrap_err();
        assert!(
            error.contains("until=\"yesterday\"") && error.contains("fix:"),
            "{error}"
        );
        let error = parse_query(Some("since=2026-12-01T09:00:00Z")).unwrap_err();
        assert!(error.contains("\"since\""), "{error}");
        assert!(parse_query(Some("redact=yes")).is_err());
    }
}
