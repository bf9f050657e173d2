//! Commands too many for one log record (a decision over 100,000 pods) are logged in pieces:
//! recovery, `replay --verify`, `explain`, `log inspect` and the what-if read them as one
//! `Commands` record, and a torn piece left by a crash is written again whole.

use nodewright_adapters::driver::Driver;
use nodewright_adapters::eventlog::{
    EventStore, LogHeader, LogRecord, MemoryStore, NwlogReader, commands_records_of,
};
use nodewright_testkit::scenario::builtin;
use nodewright_testkit::sim::{self, Crash, RunOptions};

type Store = MemoryStore<LogHeader, LogRecord>;

/// The mixed scenario's log, snapshots off, with every commands record cut into pieces of at most
/// `piece_bytes`.
fn split_log(piece_bytes: usize) -> (LogHeader, Vec<LogRecord>, u64) {
    let scenario = builtin("mixed").expect("built in").expect("loads");
    let header = LogHeader::new(scenario.config.clone(), &scenario.name);
    let options = RunOptions {
        crash: Crash::Never,
        snapshot_every: 0,
        ..RunOptions::default()
    };
    let (_, store) =
        sim::run_with(&scenario, Store::new(header.clone()), options).expect("the run completes");
    let records = store.read_range(0, store.len()).expect("records");
    let commands = records
        .iter()
        .map(|r| match r {
            LogRecord::Commands(cs) => cs.len() as u64,
            _ => 0,
        })
        .sum();
    let split = records
        .into_iter()
        .flat_map(|r| match r {
            LogRecord::Commands(cs) => commands_records_of(cs, piece_bytes),
            other => vec![other],
        })
        .collect();
    (header, split, commands)
}

fn store_of(header: &LogHeader, records: &[LogRecord]) -> Store {
    let mut store = Store::new(header.clone());
    store.append(records).expect("appends");
    store
}

fn verified(header: &LogHeader, records: &[LogRecord]) -> nodewright_replay::verify::VerifyOutcome {
    let bytes = store_of(header, records)
        .write_nwlog(Vec::new())
        .expect("writes");
    let reader: NwlogReader<LogHeader, LogRecord, _> =
        NwlogReader::new(std::io::Cursor::new(bytes)).expect("opens");
    nodewright_replay::verify(reader).expect("reads")
}

#[test]
fn split_commands_replay_recover_and_count_as_one_record() {
    let (header, records, commands) = split_log(1);
    let pieces = records
        .iter()
        .filter(|r| matches!(r, LogRecord::CommandsPart { .. }))
        .count();
    assert!(pieces > 4, "{pieces} pieces");
    let outcome = verified(&header, &records);
    assert!(outcome.divergence.is_none(), "{:?}", outcome.divergence);
    assert_eq!(outcome.commands, commands);
    let events = records
        .iter()
        .filter(|r| matches!(r, LogRecord::Event(_)))
        .count() as u64;
    let (_, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert_eq!(recovery.events, events);
    assert!(!recovery.logged_missing_commands);
}

#[test]
fn a_torn_piece_at_the_end_is_written_again_whole_and_the_log_replays() {
    let (header, mut records, _) = split_log(1);
    // Cut the log inside the last event's pieces, as a crash during their append leaves it.
    let last_event = records
        .iter()
        .rposition(|r| matches!(r, LogRecord::Event(_)))
        .expect("events");
    let first_piece = records[last_event..]
        .iter()
        .position(|r| matches!(r, LogRecord::CommandsPart { .. }));
    let cut = match first_piece {
        Some(at) => last_event + at + 1,
        // The last event gave no split commands: find one that did, and cut after its
        // first piece.
        None => {
            let at = records
                .iter()
                .rposition(|r| matches!(r, LogRecord::CommandsPart { part: 0, .. }))
                .expect("a split");
            at + 1
        }
    };
    records.truncate(cut);
    let (driver, recovery) = Driver::recover(store_of(&header, &records)).expect("recovers");
    assert!(
        recovery.logged_missing_commands,
        "the cut commands are logged again"
    );
    let rewritten = driver
        .store()
        .read_range(0, driver.store().len())
        .expect("records");
    let outcome = verified(&header, &rewritten);
    assert!(outcome.divergence.is_none(), "{:?}", outcome.divergence);
}
