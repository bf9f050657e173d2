//! The messages of the interruption queue: EventBridge events, as SQS delivers them (the body is
//! the event's JSON), read into the core's [`Interruption`]s.
//!
//! | `detail-type` | reads |
//! |---|---|
//! | `EC2 Spot Instance Interruption Warning` | `detail.instance-id`; reclaimed at `time` + 2 minutes |
//! | `EC2 Instance Rebalance Recommendation` | `detail.instance-id` |
//! | `EC2 Instance State-change Notification` | `detail.instance-id`, `detail.state` |
//! | `AWS Health Event` (`detail.service` EC2, `detail.eventTypeCategory` scheduledChange) | `detail.affectedEntities[].entityValue`, `detail.eventTypeCode` |
//!
//! Any other message is read as ignored (acknowledged, nothing to do), as Karpenter does. A body
//! that is not such an event is a [`MessageError`] that names the field and what was wrong: the
//! caller logs it and acknowledges the message, so one bad message never stops the queue.
//!
//! Reading is pure: no clock. Times are the message's own (`time`, RFC 3339), as Unix
//! milliseconds, the controller's clock.

use nodewright_core::EventKind;
use nodewright_core::interruption::{Interruption, SPOT_INTERRUPTION_NOTICE_MS};
use serde_json::Value;
use thiserror::Error;

pub const SPOT_INTERRUPTION: &str = "EC2 Spot Instance Interruption Warning";
pub const REBALANCE_RECOMMENDATION: &str = "EC2 Instance Rebalance Recommendation";
pub const STATE_CHANGE: &str = "EC2 Instance State-change Notification";
pub const HEALTH_EVENT: &str = "AWS Health Event";

/// One message, read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InterruptionMessage {
    /// The EventBridge event's `id`.
    pub message_id: String,
    pub detail_type: String,
    /// The message's `time`, Unix milliseconds.
    pub time_ms: u64,
    /// What it says, per instance (a scheduled change may name several).
    pub interruptions: Vec<(String, Interruption)>,
    /// Why nodewright does nothing with it, when it does nothing.
    pub ignored: Option<String>,
}

impl InterruptionMessage {
    /// The core's events for this message, one per instance it names.
    pub fn events(&self) -> Vec<EventKind> {
        self.interruptions
            .iter()
            .map(
                |(instance_id, interruption)| EventKind::InterruptionReceived {
                    message_id: self.message_id.clone(),
                    instance_id: instance_id.clone(),
                    interruption: interruption.clone(),
                },
            )
            .collect()
    }
}

/// Why a message body could not be read.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MessageError {
    #[error(
        "the message body is not JSON ({0}); an interruption queue receives EventBridge events only: check the queue's EventBridge rules and that nothing else sends to it"
    )]
    NotJson(String),
    #[error(
        "field {field}: {problem} (an EventBridge event of detail-type {detail_type:?} carries it; the message is acknowledged and dropped)"
    )]
    BadField {
        detail_type: String,
        field: String,
        problem: String,
    },
}

/// Reads one SQS message body.
pub fn parse(body: &str) -> Result<InterruptionMessage, MessageError> {
    let value: Value =
        serde_json::from_str(body).map_err(|e| MessageError::NotJson(e.to_string()))?;
    let detail_type = match value.get("detail-type") {
        Some(Value::String(s)) => s.clone(),
        _ => {
            return Err(MessageError::BadField {
                detail_type: String::new(),
                field: "detail-type".into(),
                problem: describe_missing(value.get("detail-type"), "a string"),
            });
        }
    };
    let reader = Reader {
        root: &value,
        detail_type: &detail_type,
    };
    let message_id = reader.string(&["id"])?;
    let time_ms = reader.time()?;
    let mut message = InterruptionMessage {
        message_id,
        detail_type: detail_type.clone(),
        time_ms,
        interruptions: Vec::new(),
        ignored: None,
    };
    match detail_type.as_str() {
        SPOT_INTERRUPTION => {
            let instance = reader.instance_id(&["detail", "instance-id"])?;
            message.interruptions.push((
                instance,
                Interruption::SpotInterruption {
                    deadline_ms: time_ms.saturating_add(SPOT_INTERRUPTION_NOTICE_MS),
                },
            ));
        }
        REBALANCE_RECOMMENDATION => {
            let instance = reader.instance_id(&["detail", "instance-id"])?;
            message
                .interruptions
                .push((instance, Interruption::RebalanceRecommendation));
        }
        STATE_CHANGE => {
            let instance = reader.instance_id(&["detail", "instance-id"])?;
            let state = reader.string(&["detail", "state"])?;
            message
                .interruptions
                .push((instance, Interruption::StateChange { state }));
        }
        HEALTH_EVENT => {
            let service = reader.string(&["detail", "service"])?;
            let category = reader.string(&["detail", "eventTypeCategory"])?;
            if service != "EC2" || category != "scheduledChange" {
                message.ignored = Some(format!(
                    "an AWS Health event of service {service} and category {category}: only EC2 scheduled changes take machines away"
                ));
                return Ok(message);
            }
            let event_type = reader.string(&["detail", "eventTypeCode"])?;
            let entities = match value.pointer("/detail/affectedEntities") {
                Some(Value::Array(a)) => a,
                other => {
                    return Err(reader.bad(
                        "detail.affectedEntities",
                        describe_missing(other, "a list of {entityValue: <instance id>}"),
                    ));
                }
            };
            for (i, entity) in entities.iter().enumerate() {
                let field = format!("detail.affectedEntities[{i}].entityValue");
                let instance = match entity.get("entityValue") {
                    Some(Value::String(s)) => s.clone(),
                    other => return Err(reader.bad(&field, describe_missing(other, "a string"))),
                };
                if check_instance_id(&reader, &field, &instance).is_err() {
                    // Another kind of entity (a dedicated host, a volume): not a machine.
                    continue;
                }
                message.interruptions.push((
                    instance,
                    Interruption::ScheduledChange {
                        event_type: event_type.clone(),
                    },
                ));
            }
            if message.interruptions.is_empty() {
                message.ignored = Some("an EC2 scheduled change that names no instance".into());
            }
        }
        other => {
            message.ignored = Some(format!(
                "detail-type {other:?} is not one nodewright acts on (spot interruption, rebalance recommendation, state change, AWS Health scheduled change)"
            ));
        }
    }
    Ok(message)
}

struct Reader<'a> {
    root: &'a Value,
    detail_type: &'a str,
}

impl Reader<'_> {
    fn bad(&self, field: &str, problem: String) -> MessageError {
        MessageError::BadField {
            detail_type: self.detail_type.to_string(),
            field: field.to_string(),
            problem,
        }
    }

    fn string(&self, path: &[&str]) -> Result<String, MessageError> {
        let mut at = Some(self.root);
        for key in path {
            at = at.and_then(|v| v.get(key));
        }
        match at {
            Some(Value::String(s)) => Ok(s.clone()),
            other => Err(self.bad(&path.join("."), describe_missing(other, "a string"))),
        }
    }

    fn instance_id(&self, path: &[&str]) -> Result<String, MessageError> {
        let id = self.string(path)?;
        check_instance_id(self, &path.join("."), &id)?;
        Ok(id)
    }

    fn time(&self) -> Result<u64, MessageError> {
        let text = self.string(&["time"])?;
        let at = humantime::parse_rfc3339_weak(&text).map_err(|e| {
            self.bad(
                "time",
                format!("{text:?} is not an RFC 3339 time ({e}); EventBridge writes e.g. 2026-12-02T12:00:00Z"),
            )
        })?;
        let since_epoch = at
            .duration_since(std::time::UNIX_EPOCH)
            .map_err(|_| self.bad("time", format!("{text:?} is before 1970")))?;
        Ok(u64::try_from(since_epoch.as_millis()).unwrap_or(u64::MAX))
    }
}

/// EC2 instance ids: `i-` and 8 or 17 hexadecimal digits.
fn check_instance_id(reader: &Reader, field: &str, id: &str) -> Result<(), MessageError> {
    let ok = id.strip_prefix("i-").is_some_and(|hex| {
        matches!(hex.len(), 8 | 17) && hex.bytes().all(|b| b.is_ascii_hexdigit())
    });
    if ok {
        Ok(())
    } else {
        Err(reader.bad(
            field,
            format!("{id:?} is not an EC2 instance id (i- and 8 or 17 hexadecimal digits)"),
        ))
    }
}

fn describe_missing(found: Option<&Value>, wanted: &str) -> String {
    match found {
        None | Some(Value::Null) => format!("missing; it must be {wanted}"),
        Some(other) => {
            let shown = other.to_string();
            let short: String = shown.chars().take(60).collect();
            let ellipsis = if short.len() < shown.len() { "…" } else { "" };
            format!("is {short}{ellipsis}, not {wanted}")
        }
    }
}
