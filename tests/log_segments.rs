//! Sealed segments of a store (what the controller ships to S3) and one log assembled from
//! them across segments and stores, which `replay --verify` checks seam by seam.

use nodewright_adapters::driver::{CommandExecutor, Driver};
use nodewright_adapters::eventlog::{
    EventStore, LogHeader, LogRecord, MemoryStore, NwlogReader, Snapshot,
};
use nodewright_core::{Command, Event};
use nodewright_replay::segments::{SegmentError, SegmentName, assemble, cut, select};
use nodewright_replay::{Replayer, verify_file};
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::{Report, sim};

type Store = MemoryStore<LogHeader, LogRecord>;

/// The `mixed` scenario's log, as a controller's store.
fn recorded() -> (Store, Report) {
    let scenario = builtin("mixed").expect("built in").expect("loads");
    let store = Store::new(LogHeader::new(scenario.config.clone(), "controller"));
    let (report, store) = sim::run(&scenario, store).expect("runs");
    (store, report)
}

fn records_of(store: &Store) -> Vec<LogRecord> {
    store.read_range(0, store.len()).expect("reads")
}

/// `records` written again as the controller seals its store: a snapshot of the core appended
/// before the event of each index in `at_events`. Returns the store and where each seal
/// begins.
fn sealed(header: LogHeader, records: Vec<LogRecord>, at_events: &[u64]) -> (Store, Vec<u64>) {
    let mut out = Store::new(header.clone());
    let mut replay = Replayer::new(header);
    let mut seals = Vec::new();
    for record in records {
        if matches!(record, LogRecord::Event(_)) && at_events.contains(&replay.events()) {
            seals.push(out.len());
            let snapshot = Snapshot::of(
                replay.core(),
                replay.events(),
                replay.commands(),
                replay.catalog_record(),
            )
            .expect("encodes");
            out.append(&snapshot.into_records()).expect("appends");
        }
        replay.feed(record.clone()).expect("replays");
        out.append(&[record]).expect("appends");
    }
    (out, seals)
}

/// The segments of `store` between its seals, with their bytes.
fn segments_of(store: &Store, seals: &[u64]) -> Vec<(SegmentName, Vec<u8>)> {
    let mut bounds = vec![0];
    bounds.extend_from_slice(seals);
    bounds.push(store.len());
    bounds
        .windows(2)
        .filter_map(|w| cut(store, w[0], w[1]).expect("cuts"))
        .map(|s| (s.name, s.bytes))
        .collect()
}

fn event_times(store: &Store) -> Vec<u64> {
    records_of(store)
        .into_iter()
        .filter_map(|r| match r {
            LogRecord::Event(e) => Some(e.at_ms),
            _ => None,
        })
        .collect()
}

struct Nowhere;

impl CommandExecutor for Nowhere {
    fn execute(&mut self, _: &Command) {}
}

/// Another leader's store: the events of `store`, `later_ms` later, decided by a core of
/// another seed (each store has its own), as that leader would have recorded them.
fn another_term(store: &Store, later_ms: u64) -> Store {
    let mut header = store.header().clone();
    header.config.seed ^= 0x5eed;
    let mut driver = Driver::new(Store::new(header));
    for record in records_of(store) {
        if let LogRecord::Event(e) = record {
            driver
                .step(Event::new(e.at_ms + later_ms, e.kind), &mut Nowhere)
                .expect("steps");
        }
    }
    driver.into_store()
}

#[test]
fn segments_of_one_store_assemble_into_the_log_and_every_seam_is_checked() {
    let (store, report) = recorded();
    let header = store.header().clone();
    let events = report.events;
    let (store, seals) = sealed(header, records_of(&store), &[events / 3, 2 * events / 3]);
    let segments = segments_of(&store, &seals);
    assert_eq!(segments.len(), 3);
    // Each names its records and times, and replays on its own.
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, bytes) in &segments {
        assert_eq!(SegmentName::parse(&name.path()).as_ref(), Some(name));
        let alone = dir.path().join("alone.nwlog");
        std::fs::write(&alone, bytes).expect("writes");
        let outcome = verify_file(&alone).expect("reads");
        assert_eq!(outcome.divergence, None, "{}", name.path());
        assert_eq!(outcome.started_at_event.is_some(), name.from > 0);
    }

    let out = dir.path().join("assembled.nwlog");
    let names = select(segments.iter().map(|(n, _)| n.clone()), None, None);
    let ordered: Vec<_> = names
        .iter()
        .map(|n| {
            segments
                .iter()
                .find(|(s, _)| s == n)
                .expect("chosen")
                .clone()
        })
        .collect();
    let assembled = assemble(&ordered, None, None, &out).expect("assembles");
    assert_eq!((assembled.segments, assembled.pieces), (3, 1));
    assert_eq!(
        (assembled.events, assembled.commands),
        (report.events, report.commands)
    );
    let outcome = verify_file(&out).expect("reads");
    assert_eq!(outcome.divergence, None);
    assert_eq!(outcome.snapshot_divergence, None);
    assert!(outcome.snapshots_checked >= 2, "{outcome:?}");
    assert_eq!(outcome.events, report.events);
    assert_eq!(outcome.decision_digest, report.decision_digest);
}

#[test]
fn a_range_across_two_stores_replays_each_term_from_its_own_log() {
    let (first, report) = recorded();
    let last_ms = *event_times(&first).last().expect("events");
    let second = another_term(&first, last_ms + 3_600_000);
    let (first, seals_a) = sealed(
        first.header().clone(),
        records_of(&first),
        &[report.events / 2],
    );
    let second_events = event_times(&second).len() as u64;
    let (second, seals_b) = sealed(
        second.header().clone(),
        records_of(&second),
        &[second_events / 2],
    );
    let mut all = segments_of(&first, &seals_a);
    all.extend(segments_of(&second, &seals_b));
    assert_ne!(all[0].0.store, all[3].0.store, "two stores");

    // From the middle of the first store's second segment to the middle of the second's
    // first: four segments of two stores, cut at the range's start.
    let times_a = event_times(&first);
    let times_b = event_times(&second);
    let from = times_a[times_a.len() * 3 / 4];
    let until = times_b[times_b.len() / 4];
    let chosen = select(all.iter().map(|(n, _)| n.clone()), Some(from), Some(until));
    assert_eq!(chosen.len(), 2, "{chosen:?}");
    let ordered: Vec<_> = chosen
        .iter()
        .map(|n| all.iter().find(|(s, _)| s == n).expect("chosen").clone())
        .collect();
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("terms.nwlog");
    let assembled = assemble(&ordered, Some(from), Some(until), &out).expect("assembles");
    assert_eq!(assembled.pieces, 2);
    let inside = times_a.iter().filter(|t| **t >= from).count()
        + times_b.iter().filter(|t| **t < until).count();
    assert_eq!(assembled.events, inside as u64);

    let outcome = verify_file(&out).expect("reads");
    assert_eq!(outcome.divergence, None);
    assert_eq!(outcome.snapshot_divergence, None);
    assert_eq!(outcome.events, inside as u64);
    assert!(
        outcome.started_at_event.is_some(),
        "cut at the range's start"
    );
    // The second piece is the second store's, from its first record.
    let mut reader: NwlogReader<LogHeader, LogRecord, _> = NwlogReader::open(&out).expect("opens");
    let terms: Vec<_> = std::iter::from_fn(|| reader.next_entry())
        .filter_map(|e| match e.expect("reads").record {
            LogRecord::Term(term) => Some(term),
            _ => None,
        })
        .collect();
    assert_eq!(terms.len(), 1);
    assert!(!terms[0].continues);
    assert_eq!(&terms[0].header, second.header());
}

#[test]
fn a_missing_segment_is_not_taken_for_a_seam() {
    let (store, report) = recorded();
    let events = report.events;
    let (store, seals) = sealed(
        store.header().clone(),
        records_of(&store),
        &[events / 3, 2 * events / 3],
    );
    let mut segments = segments_of(&store, &seals);
    // The middle segment is lost, and the last one claims to go on from the first.
    segments.remove(1);
    segments[1].0.from = segments[0].0.to;
    let dir = tempfile::tempdir().expect("temp dir");
    let out = dir.path().join("gap.nwlog");
    assemble(&segments, None, None, &out).expect("assembles");
    let outcome = verify_file(&out).expect("reads");
    assert!(
        outcome.snapshot_divergence.is_some(),
        "the seam does not hold: {outcome:?}"
    );

    // Named as they are, the two are two pieces, each replayed from its own start.
    segments[1].0.from = seals[1];
    assemble(&segments, None, None, &out).expect("assembles");
    let outcome = verify_file(&out).expect("reads");
    assert_eq!(outcome.snapshot_divergence, None);
    assert_eq!(outcome.divergence, None);
}

#[test]
fn a_segment_starts_only_at_a_seal() {
    let (store, report) = recorded();
    let (store, seals) = sealed(
        store.header().clone(),
        records_of(&store),
        &[report.events / 2],
    );
    match cut(&store, seals[0] + 1, store.len()) {
        Err(SegmentError::NotASeal(at)) => assert_eq!(at, seals[0] + 1),
        other => panic!("expected NotASeal, got {other:?}"),
    }
    // Records with no event: nothing to ship yet.
    assert_eq!(cut(&store, seals[0], seals[0] + 1).expect("cuts"), None);
}

#[test]
fn segment_names_read_back_and_others_are_not_taken_for_them() {
    let name = SegmentName {
        store: "00000000deadbeef".to_string(),
        from: 12,
        to: 400,
        first_ms: 1_700_000_000_000,
        last_ms: 1_700_000_060_000,
    };
    let path = format!("clusters/demo/{}", name.path());
    assert_eq!(SegmentName::parse(&path), Some(name));
    for junk in [
        "demo/00000000deadbeef/12-400-1-2.nwlog.partial",
        "demo/deadbeef/12-400-1-2.nwlog",
        "demo/00000000deadbeef/400-12-1-2.nwlog",
        "demo/00000000deadbeef/12-400-1.nwlog",
        "12-400-1-2.nwlog",
    ] {
        assert_eq!(SegmentName::parse(junk), None, "{junk}");
    }
}

fn nodewright(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_nodewright"))
        .args(args)
        .output()
        .expect("runs")
}

/// `log export --segments <folder>` over a copy of the bucket (`aws s3 sync`), then `replay
/// --verify` and `log inspect` of what it wrote.
#[test]
fn the_cli_assembles_a_copy_of_the_bucket_and_the_log_verifies() {
    let (first, report) = recorded();
    let last_ms = *event_times(&first).last().expect("events");
    let second = another_term(&first, last_ms + 3_600_000);
    let (first, seals) = sealed(
        first.header().clone(),
        records_of(&first),
        &[report.events / 2],
    );
    let dir = tempfile::tempdir().expect("temp dir");
    let copy = dir.path().join("bucket");
    for (name, bytes) in segments_of(&first, &seals)
        .into_iter()
        .chain(segments_of(&second, &[]))
    {
        let path = copy.join("clusters/demo").join(name.path());
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("creates");
        std::fs::write(path, bytes).expect("writes");
    }
    std::fs::write(copy.join("clusters/demo/README"), "not a segment").expect("writes");
    let out = dir.path().join("assembled.nwlog");
    let s = |p: &std::path::Path| p.to_str().expect("utf-8").to_string();
    let run = nodewright(&["log", "export", "--segments", &s(&copy), "-o", &s(&out)]);
    let text = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(text.contains("from 3 segments in 2 pieces"), "{text}");

    let verify = nodewright(&["replay", &s(&out), "--verify"]);
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let inspect = nodewright(&["log", "inspect", &s(&out)]);
    let text = String::from_utf8_lossy(&inspect.stdout);
    assert!(text.contains("assembled from 3 pieces"), "{text}");

    // Bad sources say what to do.
    let missing = nodewright(&[
        "log",
        "export",
        "--segments",
        "/no/such/folder",
        "-o",
        &s(&out),
    ]);
    assert_eq!(missing.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&missing.stderr).contains("fix:"));
    let neither = nodewright(&["log", "export", "-o", &s(&out)]);
    assert_eq!(neither.status.code(), Some(2));
}
