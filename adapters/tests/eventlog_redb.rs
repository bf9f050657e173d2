//! The controller's redb store: batches, reopening, export to `.nwlog`, damage detection.

use std::path::Path;

use nodewright_adapters::eventlog::{
    EventStore, LogError, MemoryStore, NwlogReader, RedbStore, read_nwlog_bytes,
};
use proptest::prelude::*;
use redb::{Database, ReadableTable, TableDefinition};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TestHeader {
    cluster: String,
    seed: u64,
}

impl nodewright_adapters::eventlog::Header for TestHeader {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum TestRecord {
    PodPending {
        pod: String,
        labels: Vec<String>,
        cpu_millis: u64,
    },
    NodeReady {
        node: String,
        at_ms: u64,
    },
    Timer(u64),
}

/// The raw tables, to damage a store the way a disk or a bug would.
const RAW_RECORDS: TableDefinition<u64, &[u8]> = TableDefinition::new("records");
const RAW_META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");

fn header() -> TestHeader {
    TestHeader {
        cluster: "tutorial".to_string(),
        seed: 7,
    }
}

fn records(from: u64, n: u64) -> Vec<TestRecord> {
    (from..from + n)
        .map(|i| match i % 3 {
            0 => TestRecord::PodPending {
                pod: format!("default/inflate-{i}"),
                labels: vec![format!("app=inflate-{i}"), "team=web".to_string()],
                cpu_millis: 1000,
            },
            1 => TestRecord::NodeReady {
                node: format!("ip-10-0-1-{i}"),
                at_ms: i * 1000,
            },
            _ => TestRecord::Timer(i),
        })
        .collect()
}

fn redact(record: TestRecord) -> TestRecord {
    match record {
        TestRecord::PodPending {
            labels, cpu_millis, ..
        } => TestRecord::PodPending {
            pod: "redacted".to_string(),
            labels: labels.iter().map(|_| "redacted".to_string()).collect(),
            cpu_millis,
        },
        other => other,
    }
}

fn store_with(path: &Path, batches: &[u64]) -> Vec<TestRecord> {
    let mut store = RedbStore::<TestHeader, TestRecord>::create(path, &header()).unwrap();
    let mut all = Vec::new();
    for &n in batches {
        let batch = records(all.len() as u64, n);
        store.append(&batch).unwrap();
        all.extend(batch);
        assert_eq!(store.len(), all.len() as u64);
    }
    all
}

#[test]
fn batches_survive_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let written = store_with(&path, &[3, 0, 5, 1, 40]);
    let mut store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    assert_eq!(store.header(), &header());
    assert_eq!(store.len(), 49);
    assert_eq!(store.read_range(0, 49).unwrap(), written);
    assert_eq!(store.read_range(3, 8).unwrap(), written[3..8]);
    assert_eq!(store.read_range(49, 49).unwrap(), vec![]);

    // Appending after reopening continues the numbering.
    let more = records(49, 4);
    store.append(&more).unwrap();
    drop(store);
    let store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    assert_eq!(store.len(), 53);
    assert_eq!(
        store.read_range(47, 53).unwrap(),
        [&written[47..], &more[..]].concat()
    );
}

#[test]
fn a_reader_sees_what_was_committed_when_it_was_made_and_cannot_append() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let written = store_with(&path, &[5]);
    let mut store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    let mut reader = store.reader().unwrap();
    assert_eq!(reader.header(), &header());
    assert_eq!(reader.read_range(0, 5).unwrap(), written);
    // The store goes on appending; this reader keeps its length, a new one sees more.
    let more = records(5, 3);
    store.append(&more).unwrap();
    assert_eq!(reader.len(), 5);
    let later = store.reader().unwrap();
    assert_eq!(later.len(), 8);
    assert_eq!(later.read_range(5, 8).unwrap(), more);
    // Appends go through the store, never a reader.
    let refused = reader.append(&records(8, 1)).unwrap_err();
    assert!(
        matches!(refused, LogError::ReadOnlyStore { .. }),
        "{refused}"
    );
    assert_eq!(store.len(), 8);
}

#[test]
fn ranges_outside_the_store_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    store_with(&path, &[5]);
    let store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    for (from, to) in [(0, 6), (4, 3), (6, 6), (u64::MAX, u64::MAX)] {
        assert!(
            matches!(
                store.read_range(from, to),
                Err(LogError::RangeOutOfBounds { len: 5, .. })
            ),
            "{from}..{to}"
        );
    }
}

#[test]
fn export_writes_a_portable_log_of_a_range_through_the_redaction() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let written = store_with(&path, &[10, 10]);
    let store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    let export = dir.path().join("incident.nwlog");
    let count = store.export_nwlog(&export, 4..17, redact).unwrap();
    assert_eq!(count, 13);
    assert!(!dir.path().join("incident.nwlog.partial").exists());

    let reader = NwlogReader::<TestHeader, TestRecord>::open(&export).unwrap();
    assert_eq!(reader.header(), &header());
    let read: Vec<TestRecord> = reader.collect::<Result<_, _>>().unwrap();
    let expected: Vec<TestRecord> = written[4..17].iter().cloned().map(redact).collect();
    assert_eq!(read, expected);
    assert!(
        read.iter()
            .any(|r| matches!(r, TestRecord::PodPending { pod, .. } if pod == "redacted"))
    );

    // The whole store, unredacted, and an empty range.
    let all = dir.path().join("all.nwlog");
    assert_eq!(store.export_nwlog(&all, 0..20, |r| r).unwrap(), 20);
    let (_, read) =
        read_nwlog_bytes::<TestHeader, TestRecord>(&std::fs::read(&all).unwrap()).unwrap();
    assert_eq!(read, written);
    let none = dir.path().join("none.nwlog");
    assert_eq!(store.export_nwlog(&none, 20..20, |r| r).unwrap(), 0);
    assert!(
        read_nwlog_bytes::<TestHeader, TestRecord>(&std::fs::read(&none).unwrap())
            .unwrap()
            .1
            .is_empty()
    );

    // A bad range creates no file.
    let bad = dir.path().join("bad.nwlog");
    assert!(matches!(
        store.export_nwlog(&bad, 5..21, |r| r),
        Err(LogError::RangeOutOfBounds { .. })
    ));
    assert!(!bad.exists());
}

#[test]
fn create_refuses_an_existing_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    store_with(&path, &[2]);
    let again = RedbStore::<TestHeader, TestRecord>::create(&path, &header());
    assert!(matches!(again, Err(LogError::StoreExists { .. })));
    // The store is untouched.
    let store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    assert_eq!(store.len(), 2);
}

#[test]
fn a_damaged_record_is_named_by_index() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    let written = store_with(&path, &[6]);
    {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        {
            let mut table = txn.open_table(RAW_RECORDS).unwrap();
            let mut value = table.get(3).unwrap().unwrap().value().to_vec();
            let last = value.len() - 1;
            value[last] ^= 0x01;
            table.insert(3, value.as_slice()).unwrap();
        }
        txn.commit().unwrap();
    }
    let store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
    assert_eq!(store.read_range(0, 3).unwrap(), written[..3]);
    let error = store.read_range(0, 6).unwrap_err();
    match &error {
        LogError::StoreRecordCorrupt { index, reason, .. } => {
            assert_eq!(*index, 3);
            assert!(reason.contains("fails its checksum"), "{reason}");
        }
        other => panic!("expected StoreRecordCorrupt, got {other:?}"),
    }
    assert!(error.is_damaged_or_foreign());
    assert_eq!(error.intact_records(), Some(3));
}

#[test]
fn a_missing_record_is_found_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    store_with(&path, &[6]);
    {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(RAW_RECORDS).unwrap().remove(2).unwrap();
        txn.commit().unwrap();
    }
    match RedbStore::<TestHeader, TestRecord>::open(&path) {
        Err(LogError::StoreRecordCorrupt { index: 2, .. }) => {}
        other => panic!("expected record 2 missing, got {other:?}"),
    }
}

#[test]
fn an_unknown_store_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.redb");
    store_with(&path, &[1]);
    {
        let db = Database::open(&path).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(RAW_META)
            .unwrap()
            .insert("format_version", 99u16.to_le_bytes().as_slice())
            .unwrap();
        txn.commit().unwrap();
    }
    let error = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap_err();
    assert!(
        matches!(error, LogError::UnsupportedStoreVersion { version: 99, .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("store format version(s) 1"),
        "{error}"
    );
}

#[test]
fn files_that_are_not_stores_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // A redb file of someone else.
    let other = dir.path().join("other.redb");
    {
        let db = Database::create(&other).unwrap();
        let txn = db.begin_write().unwrap();
        txn.open_table(TableDefinition::<&str, u64>::new("counters"))
            .unwrap()
            .insert("a", 1)
            .unwrap();
        txn.commit().unwrap();
    }
    assert!(matches!(
        RedbStore::<TestHeader, TestRecord>::open(&other),
        Err(LogError::NotAStore { .. })
    ));
    // Not a redb file at all.
    let text = dir.path().join("notes.txt");
    std::fs::write(&text, vec![b'x'; 8192]).unwrap();
    assert!(matches!(
        RedbStore::<TestHeader, TestRecord>::open(&text),
        Err(LogError::Store { .. })
    ));
    // No file.
    assert!(RedbStore::<TestHeader, TestRecord>::open(dir.path().join("absent.redb")).is_err());
}

/// Generic driver-side code sees only the trait.
fn append_and_read_back<S: EventStore<TestHeader, TestRecord>>(
    store: &mut S,
    batches: &[Vec<TestRecord>],
) -> Vec<TestRecord> {
    for batch in batches {
        store.append(batch).unwrap();
    }
    store.read_range(0, store.len()).unwrap()
}

#[test]
fn memory_and_redb_stores_behave_alike() {
    let dir = tempfile::tempdir().unwrap();
    let batches = vec![records(0, 4), vec![], records(4, 7)];
    let mut memory = MemoryStore::<TestHeader, TestRecord>::new(header());
    let mut redb =
        RedbStore::<TestHeader, TestRecord>::create(dir.path().join("s.redb"), &header()).unwrap();
    let from_memory = append_and_read_back(&mut memory, &batches);
    let from_redb = append_and_read_back(&mut redb, &batches);
    assert_eq!(from_memory, from_redb);
    assert_eq!(from_memory, records(0, 11));
    assert_eq!(EventStore::header(&memory), EventStore::header(&redb));
    assert!(matches!(
        memory.read_range(3, 12),
        Err(LogError::RangeOutOfBounds { len: 11, .. })
    ));
    let bytes = memory.write_nwlog(Vec::new()).unwrap();
    let (h, r) = read_nwlog_bytes::<TestHeader, TestRecord>(&bytes).unwrap();
    assert_eq!((h, r), (header(), records(0, 11)));
}

#[test]
fn a_memory_store_keeps_large_records_packed_and_reads_them_back() {
    // A pod with many labels: a record of kilobytes that packs, between small ones.
    let large = TestRecord::PodPending {
        pod: "default/labelled".to_string(),
        labels: (0..100).map(|i| format!("team=web-{}", i % 5)).collect(),
        cpu_millis: 250,
    };
    let written = vec![
        records(0, 1)[0].clone(),
        large.clone(),
        TestRecord::Timer(7),
    ];
    let mut memory = MemoryStore::<TestHeader, TestRecord>::new(header());
    memory.append(&written).unwrap();
    assert_eq!(memory.read_range(0, 3).unwrap(), written);
    assert_eq!(memory.read_range(1, 2).unwrap(), vec![large]);
    let bytes = memory.write_nwlog(Vec::new()).unwrap();
    let (_, back) = read_nwlog_bytes::<TestHeader, TestRecord>(&bytes).unwrap();
    assert_eq!(back, written);
    assert!(
        bytes.len() < 1_000,
        "the large record is packed in the file too: {}",
        bytes.len()
    );
}

fn record_strategy() -> impl Strategy<Value = TestRecord> {
    prop_oneof![
        (
            any::<String>(),
            prop::collection::vec(any::<String>(), 0..3),
            any::<u64>()
        )
            .prop_map(|(pod, labels, cpu_millis)| TestRecord::PodPending {
                pod,
                labels,
                cpu_millis
            }),
        (any::<String>(), any::<u64>())
            .prop_map(|(node, at_ms)| TestRecord::NodeReady { node, at_ms }),
        any::<u64>().prop_map(TestRecord::Timer),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn arbitrary_records_round_trip_through_redb(
        batches in prop::collection::vec(prop::collection::vec(record_strategy(), 0..8), 0..6),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.redb");
        let mut store = RedbStore::<TestHeader, TestRecord>::create(&path, &header()).unwrap();
        for batch in &batches {
            store.append(batch).unwrap();
        }
        drop(store);
        let store = RedbStore::<TestHeader, TestRecord>::open(&path).unwrap();
        let expected: Vec<TestRecord> = batches.concat();
        prop_assert_eq!(store.len(), expected.len() as u64);
        prop_assert_eq!(store.read_range(0, store.len()).unwrap(), expected);
    }
}
