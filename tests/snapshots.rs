//! Snapshots of the core in the log: a core restored from one decides exactly as the core that
//! wrote it; recovery starts from the newest usable one and passes over the others; replay
//! checks every one against the core it rebuilds.

use nodewright_adapters::driver::Driver;
use nodewright_adapters::eventlog::{
    EventStore, LogHeader, LogRecord, MemoryStore, NwlogReader, Snapshot, SnapshotError,
};
use nodewright_core::{Config, Core};
use nodewright_testkit::scenario::{Scenario, builtin};
use nodewright_testkit::sim::{self, Crash, RunOptions};
use proptest::prelude::*;

type Store = MemoryStore<LogHeader, LogRecord>;

fn tutorial(seed: u64) -> Scenario {
    builtin("seed-tutorial")
        .expect("built in")
        .expect("loads")
        .with_seed(seed)
}

/// The log of a run with a snapshot every `every` events.
fn log_of(scenario: &Scenario, every: u64) -> (LogHeader, Vec<LogRecord>) {
    let header = LogHeader::new(scenario.config.clone(), &scenario.name);
    let options = RunOptions {
        crash: Crash::Never,
        snapshot_every: every,
        ..RunOptions::default()
    };
    let (report, store) =
        sim::run_with(scenario, Store::new(header.clone()), options).expect("the run completes");
    assert!(report.passed(), "{}", report.summary());
    let records = store.read_range(0, store.len()).expect("records");
    (header, records)
}

fn store_of(header: &LogHeader, records: &[LogRecord]) -> Store {
    let mut store = Store::new(header.clone());
    store.append(records).expect("appends");
    store
}

fn encoded(core: &Core) -> Vec<u8> {
    postcard::to_stdvec(core).expect("the core encodes")
}

fn snapshot_indexes(records: &[LogRecord]) -> Vec<usize> {
    records
        .iter()
        .enumerate()
        .filter(|(_, r)| matches!(r, LogRecord::Snapshot(_)))
        .map(|(i, _)| i)
        .collect()
}

fn without_snapshots(records: &[LogRecord]) -> Vec<LogRecord> {
    records
        .iter()
        .filter(|r| !matches!(r, LogRecord::Snapshot(_)))
        .cloned()
        .collect()
}

/// The core a full replay of the events reaches.
fn full_replay(header: &LogHeader, records: &[LogRecord]) -> Vec<u8> {
    let (driver, recovery) =
        Driver::recover(store_of(header, &without_snapshots(records))).expect("recovers");
    assert_eq!(recovery.from_snapshot, None);
    encoded(driver.core())
}

#[test]
fn recovery_starts_from_the_newest_snapshot_and_reaches_the_state_of_a_full_replay() {
    let (header, records) = log_of(&tutorial(1), 8);
    let snapshots = snapshot_indexes(&records);
    assert!(snapshots.len() >= 5, "{} snapshots", snapshots.len());
    let newest = *snapshots.last().expect("one at least") as u64;

    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_eq!(recovery.from_snapshot, Some(newest));
    assert!(
        recovery.passed_over.is_empty(),
        "{:?}",
        recovery.passed_over
    );
    let events = records
        .iter()
        .filter(|r| matches!(r, LogRecord::Event(_)))
        .count() as u64;
    assert_eq!(recovery.events, events);
    assert_eq!(encoded(driver.core()), full_replay(&header, &records));
}

#[test]
fn unusable_snapshots_are_passed_over_for_an_older_one() {
    let (header, mut records) = log_of(&tutorial(2), 6);
    let snapshots = snapshot_indexes(&records);
    assert!(snapshots.len() >= 3, "{} snapshots", snapshots.len());
    let [.., third, second, newest] = snapshots[..] else {
        unreachable!("three at least")
    };
    // The newest is damaged, the one before was written by another version.
    if let LogRecord::Snapshot(s) = &mut records[newest] {
        s.core.truncate(s.core.len() / 2);
    }
    if let LogRecord::Snapshot(s) = &mut records[second] {
        s.producer = "nodewright 0.0.1".to_string();
    }
    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_eq!(recovery.from_snapshot, Some(third as u64));
    assert_eq!(recovery.passed_over.len(), 2, "{:?}", recovery.passed_over);
    assert_eq!(recovery.passed_over[0].0, newest as u64);
    assert!(matches!(
        recovery.passed_over[0].1,
        SnapshotError::Undecodable(_)
    ));
    assert_eq!(recovery.passed_over[1].0, second as u64);
    assert!(matches!(
        &recovery.passed_over[1].1,
        SnapshotError::OtherProducer { found, .. } if found == "nodewright 0.0.1"
    ));
    assert_eq!(encoded(driver.core()), full_replay(&header, &records));
}

#[test]
fn a_snapshot_whose_catalog_event_is_missing_is_passed_over() {
    let (header, mut records) = log_of(&tutorial(5), 10);
    let newest = *snapshot_indexes(&records).last().expect("one at least");
    if let LogRecord::Snapshot(s) = &mut records[newest] {
        // The catalog came with the first event; name a command record instead.
        s.catalog_record = Some(s.catalog_record.expect("a catalog") + 1);
    }
    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_ne!(recovery.from_snapshot, Some(newest as u64));
    assert!(matches!(
        recovery.passed_over[..],
        [(at, SnapshotError::CatalogMissing(_))] if at == newest as u64
    ));
    assert_eq!(encoded(driver.core()), full_replay(&header, &records));
}

#[test]
fn a_snapshot_that_leads_replay_astray_is_given_up_for_a_replay_from_the_start() {
    let (header, records) = log_of(&tutorial(6), 10);
    // Keep only the first snapshot, and make it lie: an empty cluster.
    let first = snapshot_indexes(&records)[0];
    let mut records: Vec<LogRecord> = records
        .into_iter()
        .enumerate()
        .filter(|(i, r)| *i <= first || !matches!(r, LogRecord::Snapshot(_)))
        .map(|(_, r)| r)
        .collect();
    let LogRecord::Snapshot(s) = &records[first] else {
        unreachable!("a snapshot index")
    };
    let lie = Snapshot::of(
        &Core::new(header.config.clone()),
        s.events,
        s.commands,
        s.catalog_record,
    )
    .expect("encodes");
    records[first] = LogRecord::Snapshot(lie);
    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_eq!(recovery.from_snapshot, None);
    assert_eq!(
        recovery.passed_over,
        vec![(first as u64, SnapshotError::LedAstray)]
    );
    assert_eq!(encoded(driver.core()), full_replay(&header, &records));
}

#[test]
fn a_snapshot_of_a_core_with_another_configuration_is_passed_over() {
    let (header, mut records) = log_of(&tutorial(3), 0);
    let other = Core::new(Config {
        batch_idle_ms: 2_000,
        ..header.config.clone()
    });
    let forged = Snapshot::of(&other, 0, 0, None).expect("encodes");
    records.push(LogRecord::Snapshot(forged));
    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_eq!(recovery.from_snapshot, None);
    assert_eq!(
        recovery.passed_over,
        vec![(records.len() as u64 - 1, SnapshotError::OtherConfig)]
    );
    assert_eq!(encoded(driver.core()), full_replay(&header, &records));
}

#[test]
fn replay_verify_checks_every_snapshot_against_the_core_it_rebuilds() {
    let (header, mut records) = log_of(&tutorial(4), 10);
    let snapshots = snapshot_indexes(&records);
    assert!(!snapshots.is_empty());
    let nwlog = |records: &[LogRecord]| {
        let bytes = store_of(&header, records)
            .write_nwlog(Vec::new())
            .expect("writes");
        let reader: NwlogReader<LogHeader, LogRecord, _> =
            NwlogReader::new(std::io::Cursor::new(bytes)).expect("opens");
        nodewright_replay::verify(reader).expect("reads")
    };
    let outcome = nwlog(&records);
    assert!(outcome.divergence.is_none(), "{:?}", outcome.divergence);
    assert_eq!(outcome.snapshots_checked, snapshots.len() as u64);
    assert_eq!(outcome.snapshot_divergence, None);

    // A snapshot that does not hold the state its events lead to is a divergence.
    let at = snapshots[snapshots.len() / 2];
    let LogRecord::Snapshot(s) = &records[at] else {
        unreachable!("a snapshot index")
    };
    let (events, commands, catalog) = (s.events, s.commands, s.catalog_record);
    let wrong = Snapshot::of(&Core::new(header.config.clone()), events, commands, catalog)
        .expect("encodes");
    records[at] = LogRecord::Snapshot(wrong);
    let outcome = nwlog(&records);
    assert!(outcome.divergence.is_none());
    assert_eq!(outcome.snapshot_divergence, Some(events));
}

/// The records with every snapshot split into parts of `part_bytes`, as a cluster too large for
/// one record has them written.
fn split(records: Vec<LogRecord>, part_bytes: usize) -> Vec<LogRecord> {
    records
        .into_iter()
        .flat_map(|r| match r {
            LogRecord::Snapshot(s) => s.into_records_of(part_bytes),
            other => vec![other],
        })
        .collect()
}

#[test]
fn split_snapshots_restore_in_recovery_and_are_checked_by_replay() {
    let (header, records) = log_of(&tutorial(5), 8);
    let whole = snapshot_indexes(&records).len();
    assert!(whole >= 3);
    let records = split(records, 1024);
    let parts = records
        .iter()
        .filter(|r| matches!(r, LogRecord::SnapshotPart(_)))
        .count();
    assert!(parts >= whole, "{parts} parts for {whole} snapshots");
    let newest = *snapshot_indexes(&records).last().expect("one") as u64;
    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_eq!(recovery.from_snapshot, Some(newest));
    assert!(
        recovery.passed_over.is_empty(),
        "{:?}",
        recovery.passed_over
    );
    let no_parts: Vec<LogRecord> = records
        .iter()
        .filter(|r| !matches!(r, LogRecord::SnapshotPart(_)))
        .cloned()
        .collect();
    assert_eq!(encoded(driver.core()), full_replay(&header, &no_parts));
    // replay --verify joins each and checks it against the core it rebuilds.
    let bytes = store_of(&header, &records)
        .write_nwlog(Vec::new())
        .expect("writes");
    let reader: NwlogReader<LogHeader, LogRecord, _> =
        NwlogReader::new(std::io::Cursor::new(bytes.clone())).expect("opens");
    let outcome = nodewright_replay::verify(reader).expect("reads");
    assert!(outcome.divergence.is_none(), "{:?}", outcome.divergence);
    assert_eq!(outcome.snapshots_checked, whole as u64);
    assert_eq!(outcome.snapshot_divergence, None);
    // A part lost: that snapshot is passed over in recovery for the one before.
    let mut damaged = records.clone();
    let last_part = damaged
        .iter()
        .rposition(|r| matches!(r, LogRecord::SnapshotPart(_)))
        .expect("a part");
    damaged[last_part] = LogRecord::Commands(Vec::new());
    let (_, recovery) = Driver::recover(store_of(&header, &damaged)).expect("recovers");
    assert_eq!(recovery.passed_over.len(), 1, "{:?}", recovery.passed_over);
    assert!(matches!(
        recovery.passed_over[0].1,
        SnapshotError::PartsMissing(_)
    ));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    /// Replay from any snapshot gives exactly the commands, and the later snapshots, of replay
    /// from the start.
    #[test]
    fn replay_from_any_snapshot_gives_the_commands_of_replay_from_the_start(
        seed in 1u64..10_000,
        every in 2u64..20,
        pick in any::<prop::sample::Index>(),
    ) {
        let (header, records) = log_of(&tutorial(seed), every);
        let snapshots = snapshot_indexes(&records);
        prop_assume!(!snapshots.is_empty());
        let at = snapshots[pick.index(snapshots.len())];
        let LogRecord::Snapshot(snapshot) = &records[at] else {
            unreachable!("a snapshot index")
        };
        let mut core = snapshot
            .restore(&header.config, |i| records.get(i as usize).cloned())
            .expect("restores");
        let mut replayed = Vec::new();
        let mut recorded = Vec::new();
        for record in &records[at + 1..] {
            match record {
                LogRecord::Event(e) => {
                    let commands = core.handle(e);
                    if !commands.is_empty() {
                        replayed.push(commands);
                    }
                }
                LogRecord::Commands(c) => recorded.push(c.clone()),
                LogRecord::Snapshot(later) => {
                    prop_assert_eq!(&later.core, &encoded(&core));
                }
                LogRecord::SnapshotPart(_) | LogRecord::CommandsPart { .. } => {
                    prop_assert!(false, "no record is split here")
                }
                LogRecord::Term(_) => prop_assert!(false, "a store holds one log"),
            }
        }
        prop_assert_eq!(replayed, recorded);
    }
}
