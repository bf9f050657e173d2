//! The simulated cloud's interruption messages as EventBridge writes them to the interruption
//! queue: the JSON bodies the real consumer reads ([`nodewright_adapters::eventbridge::parse`]),
//! so that the simulated build exercises the same reading as the controller.

use std::time::{Duration, UNIX_EPOCH};

use nodewright_core::interruption::Interruption;
use serde_json::{Value, json};

/// The body of the message that tells of `interruption` on `instance_id`, sent at `time_ms`
/// (milliseconds since the run's epoch, which the message carries as its RFC 3339 `time`).
pub fn message_body(
    message_id: &str,
    time_ms: u64,
    instance_id: &str,
    interruption: &Interruption,
) -> String {
    let time = humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(time_ms));
    let (detail_type, source, detail): (&str, &str, Value) = match interruption {
        Interruption::SpotInterruption { .. } => (
            "EC2 Spot Instance Interruption Warning",
            "aws.ec2",
            json!({ "instance-id": instance_id, "instance-action": "terminate" }),
        ),
        Interruption::RebalanceRecommendation => (
            "EC2 Instance Rebalance Recommendation",
            "aws.ec2",
            json!({ "instance-id": instance_id }),
        ),
        Interruption::StateChange { state } => (
            "EC2 Instance State-change Notification",
            "aws.ec2",
            json!({ "instance-id": instance_id, "state": state }),
        ),
        Interruption::ScheduledChange { event_type } => (
            "AWS Health Event",
            "aws.health",
            json!({
                "service": "EC2",
                "eventTypeCode": event_type,
                "eventTypeCategory": "scheduledChange",
                "affectedEntities": [{ "entityValue": instance_id }],
            }),
        ),
    };
    json!({
        "version": "0",
        "id": message_id,
        "detail-type": detail_type,
        "source": source,
        "account": "123456789012",
        "time": time.to_string(),
        "region": "us-east-1",
        "resources": [format!("arn:aws:ec2:us-east-1:123456789012:instance/{instance_id}")],
        "detail": detail,
    })
    .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nodewright_adapters::eventbridge::parse;
    use nodewright_core::EventKind;

    #[test]
    fn every_kind_reads_back_as_it_was_sent() {
        let kinds = [
            Interruption::SpotInterruption {
                deadline_ms: 125_500 + 120_000,
            },
            Interruption::RebalanceRecommendation,
            Interruption::StateChange {
                state: "stopping".into(),
            },
            Interruption::ScheduledChange {
                event_type: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
            },
        ];
        for interruption in kinds {
            let body = message_body("m-1", 125_500, "i-0123456789abcdef0", &interruption);
            let read = parse(&body).unwrap_or_else(|e| panic!("{interruption}: {e}"));
            assert_eq!(read.time_ms, 125_500);
            assert_eq!(read.ignored, None);
            assert_eq!(
                read.events(),
                vec![EventKind::InterruptionReceived {
                    message_id: "m-1".into(),
                    instance_id: "i-0123456789abcdef0".into(),
                    interruption,
                }]
            );
        }
    }
}
