//! `log export --redact` keeps every decision: over generated event sequences, the core decides
//! over the redacted events what it decided over the originals, one command for one.

use nodewright_core::model::pod::PodKey;
use nodewright_core::{Event, EventKind};
use nodewright_replay::redact::{Learner, Redactor};
use nodewright_testkit::harness::commands_per_event;
use nodewright_testkit::strategies::event_sequence;
use proptest::prelude::*;

/// Namespaces and label values for the generated events (which name every pod in `default`
/// and label none): drawn per pod name, so that every event about a pod agrees.
fn dress(events: &mut [Event], apps: &[&str; 8], teams: &[&str; 3]) {
    let namespace = |name: &str| match name {
        "a" | "b" => "shop",
        "c" | "d" => "billing",
        _ => "default",
    };
    let index = |name: &str| name.bytes().next().map_or(0, |b| (b - b'a') as usize % 8);
    let rekey = |key: &mut PodKey| key.namespace = namespace(&key.name).to_string();
    for event in events.iter_mut() {
        match &mut event.kind {
            EventKind::PodApplied(pod) => {
                rekey(&mut pod.key);
                let i = index(&pod.key.name);
                pod.labels.insert("app".into(), apps[i].into());
                pod.annotations.insert(
                    "kubectl.kubernetes.io/last-applied-configuration".into(),
                    format!("{{\"owner\":\"alice\",\"pod\":\"{}\"}}", pod.key.name),
                );
                if i % 3 == 0 {
                    pod.node_selector.insert("team".into(), teams[i % 3].into());
                }
                pod.owner = Some(nodewright_core::model::pod::OwnerRef {
                    kind: "ReplicaSet".into(),
                    name: format!("{}-rs", apps[i]),
                });
            }
            EventKind::PodBound { pod, .. } | EventKind::PodDeleted { pod } => rekey(pod),
            EventKind::NodePoolApplied(pool) => {
                pool.template_labels
                    .insert("team".into(), teams[pool.name.len() % 3].into());
            }
            EventKind::NodeApplied(node) => {
                let node = std::sync::Arc::make_mut(node);
                node.labels
                    .insert("team".into(), teams[node.name.len() % 3].into());
            }
            _ => {}
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn redacted_events_get_the_same_decisions(
        mut events in event_sequence(40),
        apps in prop::array::uniform8(prop::sample::select(vec!["web", "api", "batch", "cache"])),
        teams in prop::array::uniform3(prop::sample::select(vec!["ml", "payments", "search"])),
    ) {
        dress(&mut events, &apps, &teams);
        let recorded = commands_per_event(&events);

        let mut learner = Learner::default();
        let mut redacted = events.clone();
        for e in &mut redacted {
            learner.learn(&mut e.kind);
        }
        let redactor = learner.finish();
        for e in &mut redacted {
            redactor.redact(&mut e.kind);
        }
        let replayed = commands_per_event(&redacted);

        for (i, (r, g)) in recorded.iter().zip(&replayed).enumerate() {
            let r: Vec<String> = r.iter().map(|c| Redactor::decision(c, Some(&redactor))).collect();
            let g: Vec<String> = g.iter().map(|c| Redactor::decision(c, None)).collect();
            prop_assert_eq!(r, g, "event {}", i);
        }
        // Nothing of the originals is left in the redacted events.
        let text = format!("{redacted:?}");
        for gone in ["\"shop\"", "\"billing\"", "\"payments\"", "\"search\"", "-rs\"", "alice"] {
            prop_assert!(!text.contains(gone), "{} left", gone);
        }
    }
}
