//! `GET /log` on the health-probe port: the leader's event store as a portable `.nwlog`, while
//! it runs. Another process cannot open the store while the leader has it (redb locks the
//! file), so `nodewright log export` works only on a stopped controller's store; this is the
//! same export, made in the leader's process through a reader that shares the open file.
//!
//! `from` and `until` (RFC 3339) cut a time range; `redact=true` replaces names and values by
//! tokens, as `nodewright log export --redact` does. The port is not in the chart's Service:
//! the log is taken with `kubectl port-forward` to the leader's pod.

use std::path::PathBuf;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use k8s_openapi::jiff::Timestamp;
use nodewright_replay::export::{ExportError, export_store};
use tracing::{info, warn};

use nodewright_adapters::eventlog::{LogHeader, LogRecord, RedbStore};

/// The controller's event store.
type Store = RedbStore<LogHeader, LogRecord>;

/// What `/log` exports: a reader of the leader's store, while it leads.
#[derive(Clone, Default)]
pub struct LogExports {
    reader: Arc<Mutex<Option<Store>>>,
    exports: Arc<AtomicU64>,
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

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

impl LogExports {
    /// Serves exports from `reader` until the returned guard is dropped.
    pub fn offer(&self, reader: Store) -> Offered {
        if let Ok(mut slot) = self.reader.lock() {
            *slot = Some(reader);
        }
        Offered(self.clone())
    }

    /// The answer to `GET /log?<query>`.
    pub async fn answer(&self, query: Option<&str>) -> Response<Full<Bytes>> {
        let asked = match parse_query(query) {
            Ok(asked) => asked,
            Err(message) => return text(StatusCode::BAD_REQUEST, format!("{message}\n")),
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
        let exported = tokio::task::spawn_blocking(move || {
            let exported = export_store(&reader, &out, asked.from_ms, asked.until_ms, asked.redact)
                .and_then(|exported| {
                    let bytes = std::fs::read(&out).map_err(|source| {
                        ExportError::Log(nodewright_adapters::eventlog::LogError::Io {
                            path: Some(out.clone()),
                            action: "read the export back",
                            source,
                        })
                    });
                    bytes.map(|bytes| (exported, bytes))
                });
            let _ = std::fs::remove_file(&out);
            exported
        })
        .await;
        match exported {
            Ok(Ok((exported, bytes))) => {
                info!(
                    events = exported.events,
                    commands = exported.commands,
                    bytes = bytes.len(),
                    redacted = asked.redact,
                    "the log was exported over /log"
                );
                let mut response = Response::new(Full::new(Bytes::from(bytes)));
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
