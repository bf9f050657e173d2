//! The portable `.nwlog` file: round trips, torn tails, flipped bytes, foreign files.

use std::fs::OpenOptions;

use nodewright_adapters::eventlog::{
    LogError, MAGIC, NwlogReader, NwlogWriter, PREAMBLE_LEN, read_nwlog, read_nwlog_bytes,
};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct TestHeader {
    cluster: String,
    seed: u64,
    node_pools: Vec<String>,
}

impl nodewright_adapters::eventlog::Header for TestHeader {}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
enum TestRecord {
    PodPending {
        name: String,
        cpu_millis: u64,
        labels: Vec<(String, String)>,
    },
    NodeReady {
        node: String,
        at_ms: u64,
    },
    Timer(u64),
    Launch {
        node_pool: String,
        instance_types: Vec<String>,
        count: u32,
        spot: bool,
    },
}

fn header() -> TestHeader {
    TestHeader {
        cluster: "tutorial".to_string(),
        seed: 1,
        node_pools: vec!["default".to_string(), "gpu".to_string()],
    }
}

fn records(n: u64) -> Vec<TestRecord> {
    (0..n)
        .map(|i| match i % 4 {
            0 => TestRecord::PodPending {
                name: format!("inflate-{i}"),
                cpu_millis: 1000 * i,
                labels: vec![("app".to_string(), "inflate".to_string())],
            },
            1 => TestRecord::NodeReady {
                node: format!("ip-10-0-0-{i}"),
                at_ms: u64::MAX - i,
            },
            2 => TestRecord::Timer(i * 60_000),
            _ => TestRecord::Launch {
                node_pool: "default".to_string(),
                instance_types: vec!["c6i.large".to_string(), "m6i.large".to_string()],
                count: i as u32,
                spot: i % 2 == 0,
            },
        })
        .collect()
}

/// A log in memory, written in batches of `batch` records.
fn log_bytes(records: &[TestRecord], batch: usize) -> Vec<u8> {
    let mut writer = NwlogWriter::<TestHeader, TestRecord, Vec<u8>>::new(Vec::new(), &header())
        .expect("a header encodes");
    for chunk in records.chunks(batch.max(1)) {
        writer.append(chunk).expect("records encode");
    }
    assert_eq!(writer.len(), records.len() as u64);
    writer.into_inner()
}

/// Byte offsets where each frame starts (frame 0 is the header), plus the end of the log.
fn frame_starts(bytes: &[u8]) -> Vec<u64> {
    let mut reader = NwlogReader::<TestHeader, TestRecord, _>::new(bytes).expect("a sound log");
    let mut starts = vec![PREAMBLE_LEN as u64];
    while let Some(entry) = reader.next_entry() {
        starts.push(entry.expect("a sound log").byte_offset);
    }
    starts.push(reader.next_byte_offset());
    starts
}

/// Reads what a reader yields: the intact records, then the error, if any.
fn read_all(bytes: &[u8]) -> Result<(Vec<TestRecord>, Option<LogError>), LogError> {
    let reader = NwlogReader::<TestHeader, TestRecord, _>::new(bytes)?;
    let mut intact = Vec::new();
    let mut error = None;
    for item in reader {
        match item {
            Ok(record) => intact.push(record),
            Err(e) => {
                assert!(error.is_none(), "the reader yields at most one error");
                error = Some(e);
            }
        }
    }
    Ok((intact, error))
}

#[test]
fn round_trip_through_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.nwlog");
    let written = records(500);
    let mut writer = NwlogWriter::<TestHeader, TestRecord>::create(&path, &header()).unwrap();
    for chunk in written.chunks(37) {
        writer.append(chunk).unwrap();
    }
    assert_eq!(writer.len(), 500);
    let byte_len = writer.byte_len();
    drop(writer);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), byte_len);

    let reader = NwlogReader::<TestHeader, TestRecord>::open(&path).unwrap();
    assert_eq!(reader.header(), &header());
    assert_eq!(reader.format_version(), 8);
    assert_eq!(reader.path(), Some(path.as_path()));
    let read: Vec<TestRecord> = reader.collect::<Result<_, _>>().unwrap();
    assert_eq!(read, written);

    let (h, r) = read_nwlog::<TestHeader, TestRecord>(&path).unwrap();
    assert_eq!((h, r), (header(), written));
}

#[test]
fn a_log_with_no_records_reads_as_empty() {
    let bytes = log_bytes(&[], 1);
    let (h, r) = read_nwlog_bytes::<TestHeader, TestRecord>(&bytes).unwrap();
    assert_eq!(h, header());
    assert!(r.is_empty());
}

#[test]
fn create_new_refuses_an_existing_file_and_create_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.nwlog");
    let mut first = NwlogWriter::<TestHeader, TestRecord>::create_new(&path, &header()).unwrap();
    first.append(&records(3)).unwrap();
    drop(first);
    let refused = NwlogWriter::<TestHeader, TestRecord>::create_new(&path, &header());
    assert!(matches!(refused, Err(LogError::Io { .. })));
    assert_eq!(
        read_nwlog::<TestHeader, TestRecord>(&path).unwrap().1.len(),
        3
    );
    drop(NwlogWriter::<TestHeader, TestRecord>::create(&path, &header()).unwrap());
    assert_eq!(
        read_nwlog::<TestHeader, TestRecord>(&path).unwrap().1.len(),
        0
    );
}

#[test]
fn torn_tail_at_every_offset_inside_the_last_frame() {
    let written = records(6);
    let bytes = log_bytes(&written, 4);
    let starts = frame_starts(&bytes);
    let last_frame = written.len() as u64; // frame k+1 holds record k
    let last_start = starts[last_frame as usize];
    assert_eq!(*starts.last().unwrap(), bytes.len() as u64);
    for cut in last_start + 1..bytes.len() as u64 {
        let (intact, error) = read_all(&bytes[..cut as usize]).unwrap();
        assert_eq!(intact, written[..written.len() - 1], "cut at {cut}");
        match error {
            Some(LogError::TornTail {
                frame_index,
                byte_offset,
                intact_records,
                available,
                ..
            }) => {
                assert_eq!(frame_index, last_frame, "cut at {cut}");
                assert_eq!(byte_offset, last_start, "cut at {cut}");
                assert_eq!(intact_records, last_frame - 1);
                assert_eq!(available, cut - last_start);
            }
            other => panic!("cut at {cut}: expected a torn tail, got {other:?}"),
        }
    }
}

#[test]
fn torn_tail_in_a_file_names_the_frame_and_says_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cut.nwlog");
    let written = records(5);
    std::fs::write(&path, log_bytes(&written, 5)).unwrap();
    let starts = frame_starts(&std::fs::read(&path).unwrap());
    let last_start = starts[5];
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(last_start + 3)
        .unwrap();
    let mut reader = NwlogReader::<TestHeader, TestRecord>::open(&path).unwrap();
    for expected in &written[..4] {
        assert_eq!(&reader.next().unwrap().unwrap(), expected);
    }
    let error = reader.next().unwrap().unwrap_err();
    assert!(reader.next().is_none(), "nothing after the error");
    assert_eq!(error.frame_index(), Some(5));
    assert_eq!(error.byte_offset(), Some(last_start));
    assert_eq!(error.intact_records(), Some(4));
    assert_eq!(error.path(), Some(path.as_path()));
    assert!(error.is_damaged_or_foreign());
    let message = error.to_string();
    assert!(message.contains(&format!(
        "frame 5 (record 4) at byte {last_start} is incomplete"
    )));
    assert!(message.contains("the log was cut while writing"));
    assert!(message.contains("the 4 earlier records are intact"));
    assert!(message.contains("restore the log from its source"));
}

#[test]
fn every_prefix_reads_as_records_then_a_precise_error() {
    let written = records(5);
    let bytes = log_bytes(&written, 2);
    let starts = frame_starts(&bytes);
    for cut in 0..=bytes.len() {
        let prefix = &bytes[..cut];
        let cut = cut as u64;
        match read_all(prefix) {
            Err(LogError::TruncatedPreamble { length, .. }) => {
                assert!(cut < PREAMBLE_LEN as u64);
                assert_eq!(length, cut);
            }
            Err(LogError::TornTail {
                frame_index: 0,
                byte_offset,
                ..
            }) => {
                assert!(cut >= starts[0] && cut < starts[1], "cut at {cut}");
                assert_eq!(byte_offset, starts[0]);
            }
            Ok((intact, None)) => {
                // Cut exactly on a frame boundary: a shorter, sound log.
                let k = starts
                    .iter()
                    .position(|s| *s == cut)
                    .expect("a frame boundary");
                assert!(k >= 1, "cut at {cut}");
                assert_eq!(intact, written[..k - 1]);
            }
            Ok((
                intact,
                Some(LogError::TornTail {
                    frame_index,
                    byte_offset,
                    ..
                }),
            )) => {
                let k = frame_index as usize;
                assert!(starts[k] < cut && cut < starts[k + 1], "cut at {cut}");
                assert_eq!(byte_offset, starts[k]);
                assert_eq!(intact, written[..k - 1]);
            }
            other => panic!("cut at {cut}: unexpected {other:?}"),
        }
    }
}

#[test]
fn every_flipped_byte_is_reported_at_the_right_place() {
    let written = records(4);
    let bytes = log_bytes(&written, 4);
    let starts = frame_starts(&bytes);
    for position in 0..bytes.len() {
        for mask in [0x01u8, 0x80, 0xFF] {
            let mut damaged = bytes.clone();
            damaged[position] ^= mask;
            let place = format!("byte {position} ^ 0x{mask:02x}");
            let result = read_all(&damaged);
            if position < 8 {
                assert!(
                    matches!(result, Err(LogError::NotNwlog { .. })),
                    "{place}: {result:?}"
                );
                continue;
            }
            if position < 10 {
                let version = u16::from_le_bytes([damaged[8], damaged[9]]);
                if nodewright_adapters::eventlog::READABLE_VERSIONS.contains(&version) {
                    // Another version this build reads, framed alike: nothing can tell it from
                    // a real one, and a header whose layout it shares reads the same.
                    assert!(result.is_ok(), "{place}: {result:?}");
                } else {
                    assert!(
                        matches!(result, Err(LogError::UnsupportedVersion { .. })),
                        "{place}: {result:?}"
                    );
                }
                continue;
            }
            if position < PREAMBLE_LEN {
                assert!(
                    matches!(result, Err(LogError::ReservedNotZero { .. })),
                    "{place}: {result:?}"
                );
                continue;
            }
            // The frame holding the byte, and whether the byte is in its length field.
            let frame = starts
                .windows(2)
                .position(|w| w[0] <= position as u64 && (position as u64) < w[1])
                .expect("every byte after the preamble is in a frame");
            let in_length = (position as u64) < starts[frame] + 4;
            let error = match result {
                Err(error) => {
                    assert_eq!(frame, 0, "{place}: only the header fails at open: {error}");
                    error
                }
                Ok((intact, Some(error))) => {
                    assert_eq!(intact, written[..frame - 1], "{place}: the intact prefix");
                    error
                }
                Ok((_, None)) => panic!("{place}: the damage went unnoticed"),
            };
            assert_eq!(error.frame_index(), Some(frame as u64), "{place}: {error}");
            assert_eq!(error.byte_offset(), Some(starts[frame]), "{place}: {error}");
            if in_length {
                assert!(
                    matches!(
                        error,
                        LogError::ChecksumMismatch { .. }
                            | LogError::FrameTooLarge { .. }
                            | LogError::TornTail { .. }
                    ),
                    "{place}: {error}"
                );
            } else {
                // A flip in the checksum or the payload is always a checksum mismatch.
                assert!(
                    matches!(error, LogError::ChecksumMismatch { .. }),
                    "{place}: {error}"
                );
                let message = error.to_string();
                assert!(message.contains("fails its checksum"), "{message}");
                assert!(
                    message.contains("corrupted from this frame on"),
                    "{message}"
                );
            }
        }
    }
}

#[test]
fn a_length_over_the_maximum_is_reported_not_allocated() {
    let written = records(3);
    let mut bytes = log_bytes(&written, 3);
    let starts = frame_starts(&bytes);
    let at = starts[2] as usize;
    bytes[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let (intact, error) = read_all(&bytes).unwrap();
    assert_eq!(intact, written[..1]);
    match error {
        Some(LogError::FrameTooLarge {
            frame_index: 2,
            length,
            max,
            ..
        }) => {
            assert_eq!(length, u64::from(u32::MAX));
            assert_eq!(max, 16 * 1024 * 1024);
        }
        other => panic!("expected FrameTooLarge at frame 2, got {other:?}"),
    }
}

#[test]
fn a_file_that_is_not_a_log_is_named_as_such() {
    let result = read_nwlog_bytes::<TestHeader, TestRecord>(b"kind: NodePool\nmetadata: {}\n");
    match result {
        Err(LogError::NotNwlog { found, .. }) => assert_eq!(found, b"kind: No"),
        other => panic!("expected NotNwlog, got {other:?}"),
    }
    // A text-mode copy turns the CR LF of the magic into LF.
    let bytes = log_bytes(&records(1), 1);
    let mut mangled = b"NWLOG\n".to_vec();
    mangled.extend_from_slice(&bytes[7..]);
    let error = read_nwlog_bytes::<TestHeader, TestRecord>(&mangled).unwrap_err();
    assert!(matches!(error, LogError::NotNwlog { .. }));
    assert!(error.to_string().contains("binary mode"), "{error}");
    // An empty file, or a cut magic, is a truncated preamble rather than a foreign file.
    assert!(matches!(
        read_nwlog_bytes::<TestHeader, TestRecord>(&[]),
        Err(LogError::TruncatedPreamble { length: 0, .. })
    ));
    assert!(matches!(
        read_nwlog_bytes::<TestHeader, TestRecord>(&MAGIC[..5]),
        Err(LogError::TruncatedPreamble { length: 5, .. })
    ));
}

#[test]
fn an_unknown_version_says_which_versions_this_build_reads() {
    let mut bytes = log_bytes(&records(2), 2);
    bytes[8..10].copy_from_slice(&99u16.to_le_bytes());
    let error = read_nwlog_bytes::<TestHeader, TestRecord>(&bytes).unwrap_err();
    match &error {
        LogError::UnsupportedVersion {
            version, supported, ..
        } => {
            assert_eq!(*version, 99);
            assert_eq!(*supported, &[1u16, 2, 3, 4, 5, 6, 7, 8][..]);
        }
        other => panic!("expected UnsupportedVersion, got {other:?}"),
    }
    let message = error.to_string();
    assert!(message.contains("format version 99"), "{message}");
    assert!(message.contains("reads format version(s) 1"), "{message}");
}

#[test]
fn a_header_of_another_type_is_undecodable_at_frame_zero() {
    let bytes = log_bytes(&records(2), 2);
    // TestHeader starts with a string; a bool reads its length byte (8) and refuses it.
    #[derive(Debug, Serialize, Deserialize)]
    struct BoolHeader(bool);
    impl nodewright_adapters::eventlog::Header for BoolHeader {}
    let error = read_nwlog_bytes::<BoolHeader, TestRecord>(&bytes).unwrap_err();
    assert!(
        matches!(
            error,
            LogError::Undecodable {
                frame_index: 0,
                byte_offset: 12,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("does not decode as a v1 header"),
        "{error}"
    );
}

fn record_strategy() -> impl Strategy<Value = TestRecord> {
    let text = "[a-z0-9./-]{0,24}";
    prop_oneof![
        (
            text,
            any::<u64>(),
            prop::collection::vec((text, text), 0..4)
        )
            .prop_map(|(name, cpu_millis, labels)| TestRecord::PodPending {
                name,
                cpu_millis,
                labels
            }),
        (any::<String>(), any::<u64>())
            .prop_map(|(node, at_ms)| TestRecord::NodeReady { node, at_ms }),
        any::<u64>().prop_map(TestRecord::Timer),
        (
            text,
            prop::collection::vec(text, 0..6),
            any::<u32>(),
            any::<bool>()
        )
            .prop_map(
                |(node_pool, instance_types, count, spot)| TestRecord::Launch {
                    node_pool,
                    instance_types,
                    count,
                    spot
                }
            ),
    ]
}

proptest! {
    #[test]
    fn arbitrary_records_round_trip(
        written in prop::collection::vec(record_strategy(), 0..64),
        batch in 1usize..10,
        seed in any::<u64>(),
        cluster in any::<String>(),
    ) {
        let header = TestHeader { cluster, seed, node_pools: vec![] };
        let mut writer =
            NwlogWriter::<TestHeader, TestRecord, Vec<u8>>::new(Vec::new(), &header).unwrap();
        for chunk in written.chunks(batch) {
            writer.append(chunk).unwrap();
        }
        let bytes = writer.into_inner();
        let (h, r) = read_nwlog_bytes::<TestHeader, TestRecord>(&bytes).unwrap();
        prop_assert_eq!(h, header);
        prop_assert_eq!(r, written);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        let _ = read_nwlog_bytes::<TestHeader, TestRecord>(&bytes);
        let _ = read_all(&bytes);
    }

    #[test]
    fn arbitrary_bytes_after_a_sound_start_never_panic(
        tail in prop::collection::vec(any::<u8>(), 0..512),
    ) {
        let mut bytes = log_bytes(&records(2), 2);
        bytes.extend_from_slice(&tail);
        let (intact, _) = read_all(&bytes).unwrap();
        prop_assert_eq!(&intact[..2], &records(2)[..]);
    }
}
