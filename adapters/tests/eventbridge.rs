//! The interruption queue's EventBridge messages, real-shaped ones and malformed ones: every
//! body is read into interruptions, read as ignored, or refused with the field that is wrong;
//! none panics.

use std::path::Path;

use nodewright_adapters::eventbridge::{MessageError, parse};
use nodewright_core::EventKind;
use nodewright_core::interruption::Interruption;
use proptest::prelude::*;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/eventbridge")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// 2026-12-02T12:00:00Z in Unix milliseconds.
const NOON: u64 = 1_796_212_800_000;

#[test]
fn a_spot_interruption_warning_is_reclaimed_two_minutes_after_its_time() {
    let m = parse(&fixture("spot-interruption.json")).expect("reads");
    assert_eq!(m.message_id, "1e5527d7-bb36-4607-3370-4164db56a40e");
    assert_eq!(m.time_ms, NOON);
    assert_eq!(
        m.interruptions,
        vec![(
            "i-0b662ef9931388ba0".to_string(),
            Interruption::SpotInterruption {
                deadline_ms: NOON + 120_000
            }
        )]
    );
    assert_eq!(m.ignored, None);
    assert_eq!(
        m.events(),
        vec![EventKind::InterruptionReceived {
            message_id: m.message_id.clone(),
            instance_id: "i-0b662ef9931388ba0".into(),
            interruption: Interruption::SpotInterruption {
                deadline_ms: NOON + 120_000
            },
        }]
    );
}

#[test]
fn rebalance_and_state_change_messages_name_their_instance() {
    let m = parse(&fixture("rebalance-recommendation.json")).expect("reads");
    assert_eq!(
        m.interruptions,
        vec![(
            "i-0c3e1f4a5b6d7e8f9".to_string(),
            Interruption::RebalanceRecommendation
        )]
    );
    assert_eq!(m.time_ms, NOON + 90_000);
    let m = parse(&fixture("state-change-stopping.json")).expect("reads");
    assert_eq!(
        m.interruptions,
        vec![(
            "i-abcd1111".to_string(),
            Interruption::StateChange {
                state: "stopping".into()
            }
        )]
    );
}

#[test]
fn an_ec2_scheduled_change_names_every_affected_instance() {
    let m = parse(&fixture("health-scheduled-change.json")).expect("reads");
    let change = Interruption::ScheduledChange {
        event_type: "AWS_EC2_INSTANCE_RETIREMENT_SCHEDULED".into(),
    };
    assert_eq!(
        m.interruptions,
        vec![
            ("i-0b662ef9931388ba0".to_string(), change.clone()),
            ("i-0c3e1f4a5b6d7e8f9".to_string(), change),
        ]
    );
    assert_eq!(m.events().len(), 2, "one event per instance");
}

#[test]
fn messages_nodewright_does_not_act_on_are_read_as_ignored() {
    for (file, says) in [
        ("health-issue-other-service.json", "service RDS"),
        ("unknown-detail-type.json", "EC2 Instance Launch Successful"),
    ] {
        let m = parse(&fixture(file)).expect("reads");
        assert!(m.interruptions.is_empty(), "{file}");
        assert!(m.events().is_empty(), "{file}");
        let why = m.ignored.expect("says why");
        assert!(why.contains(says), "{file}: {why}");
    }
}

#[test]
fn malformed_messages_are_refused_with_the_field_and_the_problem() {
    for (file, field, problem) in [
        (
            "malformed-missing-instance-id.json",
            "detail.instance-id",
            "missing",
        ),
        (
            "malformed-instance-id-number.json",
            "detail.instance-id",
            "12345",
        ),
        ("malformed-bad-time.json", "time", "yesterday at noon"),
        (
            "malformed-not-an-instance-id.json",
            "detail.instance-id",
            "not an EC2 instance id",
        ),
        ("malformed-json-array.json", "detail-type", "missing"),
        (
            "malformed-health-entities.json",
            "detail.affectedEntities[1].entityValue",
            "missing",
        ),
    ] {
        match parse(&fixture(file)) {
            Err(MessageError::BadField {
                field: f,
                problem: p,
                ..
            }) => {
                assert_eq!(f, field, "{file}");
                assert!(p.contains(problem), "{file}: {p}");
            }
            other => panic!("{file}: {other:?}"),
        }
    }
    for file in ["malformed-not-json.txt", "malformed-empty.txt"] {
        let err = parse(&fixture(file)).expect_err(file);
        assert!(matches!(err, MessageError::NotJson(_)), "{file}: {err:?}");
        assert!(err.to_string().contains("EventBridge"), "{err}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Any body at all is read or refused; none panics.
    #[test]
    fn arbitrary_bodies_never_panic(body in ".{0,400}") {
        let _ = parse(&body);
    }

    /// Real messages with one field replaced by an arbitrary JSON value are read or refused.
    #[test]
    fn damaged_real_messages_never_panic(
        which in 0usize..4,
        path in prop::sample::select(vec![
            "/id", "/time", "/detail-type", "/detail", "/detail/instance-id", "/detail/state",
            "/detail/affectedEntities", "/detail/service", "/detail/eventTypeCategory",
        ]),
        replacement in prop_oneof![
            Just(serde_json::Value::Null),
            any::<i64>().prop_map(serde_json::Value::from),
            ".{0,30}".prop_map(serde_json::Value::from),
            Just(serde_json::json!([{"entityValue": 7}])),
            Just(serde_json::json!({})),
        ],
    ) {
        let file = ["spot-interruption.json", "rebalance-recommendation.json",
            "state-change-stopping.json", "health-scheduled-change.json"][which];
        let mut value: serde_json::Value = serde_json::from_str(&fixture(file)).unwrap();
        if let Some(slot) = value.pointer_mut(path) {
            *slot = replacement;
        }
        let _ = parse(&value.to_string());
    }
}

#[test]
fn a_scheduled_change_skips_entities_that_are_not_instances() {
    let mut value: serde_json::Value =
        serde_json::from_str(&fixture("health-scheduled-change.json")).unwrap();
    value["detail"]["affectedEntities"]
        .as_array_mut()
        .expect("a list")
        .push(serde_json::json!({"entityValue": "h-0123456789abcdef0"}));
    let m = parse(&value.to_string()).expect("reads");
    assert_eq!(
        m.interruptions.len(),
        2,
        "the dedicated host is not a machine"
    );
}
