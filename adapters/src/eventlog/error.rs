//! The one error type of the event log.
//!
//! Every variant that points into a log carries its fields publicly (`path`, `frame_index`,
//! `byte_offset`, `intact_records`), so that a command-line front end can map them to an exit
//! code and print where the damage starts. Every message ends with what to do about it.

use std::fmt;
use std::path::{Path, PathBuf};

use super::preamble::{MAGIC, PREAMBLE_LEN};

/// Everything that can go wrong while writing or reading an event log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogError {
    /// The operating system refused a read, write, sync, rename or open.
    #[error("{}: could not {action}: {source}", ShowPath(.path))]
    Io {
        /// The file concerned, if the log lives in a file.
        path: Option<PathBuf>,
        /// What was being done, e.g. "open the log for reading".
        action: &'static str,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The file does not start with the nwlog magic bytes.
    #[error(
        "{}: not a nwlog file: it starts with [{}] where a nwlog file starts with [{}] \
         (\"NWLOG\\r\\n\\x1a\"); check the path. A file that went through a text-mode copy \
         (\\r\\n turned into \\n) must be copied again in binary mode",
        ShowPath(.path), Hex(.found), Hex(&MAGIC)
    )]
    NotNwlog {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The first bytes found (up to the length of the magic).
        found: Vec<u8>,
    },

    /// The file starts like a nwlog file but ends before its 12-byte preamble does.
    #[error(
        "{}: the file is {length} bytes long, shorter than the {PREAMBLE_LEN}-byte nwlog \
         preamble: it was cut while being created and holds no records; write or export it again",
        ShowPath(.path)
    )]
    TruncatedPreamble {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The length of the file in bytes.
        length: u64,
    },

    /// The preamble names a format version this build has no decoder for.
    #[error(
        "{}: the log has format version {version}, and this build reads format version(s) {}: \
         it was written by a newer nodewright (read it with that release or a later one), \
         or its preamble is corrupted",
        ShowPath(.path), List(.supported)
    )]
    UnsupportedVersion {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The version found in the preamble.
        version: u16,
        /// The versions this build reads.
        supported: &'static [u16],
    },

    /// The reserved field of the preamble is not zero.
    #[error(
        "{}: the reserved field of the preamble (bytes 10..12) is 0x{value:04x}, but format \
         version {version} requires 0: the file was written by a newer nodewright (read it with \
         that release) or its preamble is corrupted",
        ShowPath(.path)
    )]
    ReservedNotZero {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The format version found in the preamble.
        version: u16,
        /// The value found in the reserved field.
        value: u16,
    },

    /// The log ends inside a frame: the writer was interrupted (or the length field of this
    /// frame is damaged so that it points past the end of the file).
    #[error(
        "{}: {} at byte {byte_offset} is incomplete ({available} of {needed} bytes present): \
         the log was cut while writing; {}. Keep the intact prefix as a log of its own with \
         `nodewright log repair LOG --out F.nwlog`, or restore the log from its source (`nodewright log export` from the controller's store)",
        ShowPath(.path), FrameName(*.frame_index), Intact(*.intact_records)
    )]
    TornTail {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The index of the incomplete frame (frame 0 is the header, frame k+1 is record k).
        frame_index: u64,
        /// The byte offset of the start of the incomplete frame.
        byte_offset: u64,
        /// The number of records before this frame, all intact.
        intact_records: u64,
        /// The bytes the frame needs (8-byte frame head plus payload, as far as known).
        needed: u64,
        /// The bytes present from the start of the frame to the end of the file.
        available: u64,
    },

    /// A frame's payload does not match its CRC-32.
    #[error(
        "{}: {} at byte {byte_offset} fails its checksum (stored 0x{stored:08x}, computed \
         0x{computed:08x}): the file is corrupted from this frame on; {}. Keep the intact \
         prefix with `nodewright log repair LOG --out F.nwlog`, or restore the log from its source (a backup, or `nodewright log export` from \
         the controller's store)",
        ShowPath(.path), FrameName(*.frame_index), Intact(*.intact_records)
    )]
    ChecksumMismatch {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The index of the damaged frame (frame 0 is the header, frame k+1 is record k).
        frame_index: u64,
        /// The byte offset of the start of the damaged frame.
        byte_offset: u64,
        /// The number of records before this frame, all intact.
        intact_records: u64,
        /// The CRC-32 stored in the frame.
        stored: u32,
        /// The CRC-32 of the payload as read.
        computed: u32,
    },

    /// A frame declares a payload longer than the format allows.
    #[error(
        "{}: {} at byte {byte_offset} declares a payload of {length} bytes, over the maximum of \
         {max} bytes: its length field is corrupted; {}. Keep the intact prefix with \
         `nodewright log repair LOG --out F.nwlog`, or restore the log from its source (a backup, or `nodewright log export` from the controller's \
         store)",
        ShowPath(.path), FrameName(*.frame_index), Intact(*.intact_records)
    )]
    FrameTooLarge {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The index of the frame (frame 0 is the header, frame k+1 is record k).
        frame_index: u64,
        /// The byte offset of the start of the frame.
        byte_offset: u64,
        /// The number of records before this frame, all intact.
        intact_records: u64,
        /// The declared payload length.
        length: u64,
        /// The maximum payload length.
        max: u32,
    },

    /// A frame passes its checksum but its payload is not a postcard encoding of the expected
    /// type: the log was written with different header or record types.
    #[error(
        "{}: {} at byte {byte_offset} does not decode as a v1 {}: {reason}; its checksum is \
         correct, so the log was written by a build with different record types: read it with \
         the nodewright release that wrote it; {}",
        ShowPath(.path), FrameName(*.frame_index), FrameKind(*.frame_index),
        Intact(*.intact_records)
    )]
    Undecodable {
        /// The file concerned.
        path: Option<PathBuf>,
        /// The index of the frame (frame 0 is the header, frame k+1 is record k).
        frame_index: u64,
        /// The byte offset of the start of the frame.
        byte_offset: u64,
        /// The number of records before this frame, all intact.
        intact_records: u64,
        /// What the decoder reported.
        reason: String,
    },

    /// A header or record could not be encoded with postcard (for example a map or sequence
    /// whose length serde does not know in advance).
    #[error(
        "could not encode the {what} with postcard: {source}; nothing of this append was \
         written. The {what} type must serialize with known lengths (no `serialize_seq(None)`)"
    )]
    Encode {
        /// "header", "record" or "snapshot".
        what: &'static str,
        /// The postcard error.
        #[source]
        source: postcard::Error,
    },

    /// A record encodes to more bytes than one frame may hold.
    #[error(
        "record {index_in_batch} of the batch encodes to {length} bytes, over the frame maximum \
         of {max} bytes; nothing of this append was written. Split the record"
    )]
    RecordTooLarge {
        /// The position of the record in the slice given to `append`.
        index_in_batch: usize,
        /// Its encoded length.
        length: usize,
        /// The maximum payload length.
        max: u32,
    },

    /// An earlier append to this writer failed part-way, so the file may end in an incomplete
    /// frame; appending after it would bury that frame inside the log.
    #[error(
        "{}: an earlier append failed part-way, so the log may end in an incomplete frame; \
         this writer accepts no more records. Open a new log (the records before the failed \
         append are intact)",
        ShowPath(.path)
    )]
    WriterFailed {
        /// The file concerned.
        path: Option<PathBuf>,
    },

    /// A range outside the records stored was asked for.
    #[error(
        "records {from}..{to} asked for, but the log holds records 0..{len}; ask for a range \
         with from <= to <= {len}"
    )]
    RangeOutOfBounds {
        /// Start of the range asked for (inclusive).
        from: u64,
        /// End of the range asked for (exclusive).
        to: u64,
        /// The number of records stored.
        len: u64,
    },

    /// Records were asked of a store that keeps none ([`super::DiscardStore`]).
    #[error(
        "records {from}..{to} asked for, but this run kept no log; run it with `--log F.nwlog` \
         (or `--store F.redb`) to keep one"
    )]
    NotKept {
        /// Start of the range asked for (inclusive).
        from: u64,
        /// End of the range asked for (exclusive).
        to: u64,
    },

    /// redb reported an error.
    #[error("{}: could not {action} (a redb event store): {source}", .path.display())]
    Store {
        /// The store file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The redb error (boxed: it is large, and rare).
        #[source]
        source: Box<redb::Error>,
    },

    /// `RedbStore::create` found a file at the path.
    #[error(
        "{}: a file already exists here; open it with `RedbStore::open`, or move it away to \
         start a new store",
        .path.display()
    )]
    StoreExists {
        /// The store file.
        path: PathBuf,
    },

    /// The redb file is not a nodewright event store (its `meta` table or format version is
    /// missing).
    #[error("{}: not a nodewright event store: {detail}; check the path", .path.display())]
    NotAStore {
        /// The file concerned.
        path: PathBuf,
        /// What is missing.
        detail: String,
    },

    /// The store has a format version this build does not know.
    #[error(
        "{}: the store has format version {version}, and this build reads store format \
         version(s) {}: it was written by a newer nodewright; run that release or a later one",
        .path.display(), List(.supported)
    )]
    UnsupportedStoreVersion {
        /// The store file.
        path: PathBuf,
        /// The version found.
        version: u16,
        /// The versions this build reads.
        supported: &'static [u16],
    },

    /// An append through a reader of the store (see `RedbStore::reader`).
    #[error(
        "{}: this handle reads the store and cannot append to it; append through the store \
         it was made from",
        .path.display()
    )]
    ReadOnlyStore {
        /// The store file.
        path: PathBuf,
    },

    /// An entry of the store's `meta` table is damaged.
    #[error(
        "{}: the store's meta entry {key:?} is damaged: {reason}; restore the store from a \
         backup",
        .path.display()
    )]
    StoreMetaCorrupt {
        /// The store file.
        path: PathBuf,
        /// The meta key.
        key: &'static str,
        /// What is wrong with it.
        reason: String,
    },

    /// A record of the store is missing, fails its checksum, or does not decode.
    #[error(
        "{}: record {index} of the store is damaged: {reason}; records before it are \
         intact: export them with `nodewright log export`, or restore the store from a backup",
        .path.display()
    )]
    StoreRecordCorrupt {
        /// The store file.
        path: PathBuf,
        /// The index of the damaged record.
        index: u64,
        /// What is wrong with it.
        reason: String,
    },
}

impl LogError {
    /// The record of frame `frame_index` (at `byte_offset` of the file at `path`) was read
    /// whole but does not decode; every record before it is intact.
    pub fn undecodable(
        path: Option<PathBuf>,
        frame_index: u64,
        byte_offset: u64,
        reason: String,
    ) -> LogError {
        LogError::Undecodable {
            path,
            frame_index,
            byte_offset,
            intact_records: frame_index.saturating_sub(1),
            reason,
        }
    }

    /// Another process (or another handle in this one) has the store open: a leader that is
    /// still stopping, say. Opening it again later may succeed.
    pub fn is_store_in_use(&self) -> bool {
        matches!(self, LogError::Store { source, .. } if matches!(**source, redb::Error::DatabaseAlreadyOpen))
    }

    /// The file the error is about, if any.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Self::Io { path, .. }
            | Self::NotNwlog { path, .. }
            | Self::TruncatedPreamble { path, .. }
            | Self::UnsupportedVersion { path, .. }
            | Self::ReservedNotZero { path, .. }
            | Self::TornTail { path, .. }
            | Self::ChecksumMismatch { path, .. }
            | Self::FrameTooLarge { path, .. }
            | Self::Undecodable { path, .. }
            | Self::WriterFailed { path } => path.as_deref(),
            Self::Store { path, .. }
            | Self::StoreExists { path }
            | Self::NotAStore { path, .. }
            | Self::UnsupportedStoreVersion { path, .. }
            | Self::StoreMetaCorrupt { path, .. }
            | Self::ReadOnlyStore { path }
            | Self::StoreRecordCorrupt { path, .. } => Some(path),
            Self::Encode { .. }
            | Self::RecordTooLarge { .. }
            | Self::RangeOutOfBounds { .. }
            | Self::NotKept { .. } => None,
        }
    }

    /// The index of the damaged frame of a `.nwlog` file (frame 0 is the header, frame k+1 is
    /// record k), when the error is about one frame.
    pub fn frame_index(&self) -> Option<u64> {
        match self {
            Self::TornTail { frame_index, .. }
            | Self::ChecksumMismatch { frame_index, .. }
            | Self::FrameTooLarge { frame_index, .. }
            | Self::Undecodable { frame_index, .. } => Some(*frame_index),
            _ => None,
        }
    }

    /// The byte offset where the damaged frame starts, when the error is about one frame.
    pub fn byte_offset(&self) -> Option<u64> {
        match self {
            Self::TornTail { byte_offset, .. }
            | Self::ChecksumMismatch { byte_offset, .. }
            | Self::FrameTooLarge { byte_offset, .. }
            | Self::Undecodable { byte_offset, .. } => Some(*byte_offset),
            _ => None,
        }
    }

    /// How many records before the damage are intact, when the error is about one frame or one
    /// stored record.
    pub fn intact_records(&self) -> Option<u64> {
        match self {
            Self::TornTail { intact_records, .. }
            | Self::ChecksumMismatch { intact_records, .. }
            | Self::FrameTooLarge { intact_records, .. }
            | Self::Undecodable { intact_records, .. } => Some(*intact_records),
            Self::StoreRecordCorrupt { index, .. } => Some(*index),
            _ => None,
        }
    }

    /// True when the bytes of a log are damaged or not a log this build reads (as opposed to an
    /// operating-system failure or a caller mistake). A command-line front end maps these, like
    /// I/O errors while reading, to "the log is unreadable".
    pub fn is_damaged_or_foreign(&self) -> bool {
        matches!(
            self,
            Self::NotNwlog { .. }
                | Self::TruncatedPreamble { .. }
                | Self::UnsupportedVersion { .. }
                | Self::ReservedNotZero { .. }
                | Self::TornTail { .. }
                | Self::ChecksumMismatch { .. }
                | Self::FrameTooLarge { .. }
                | Self::Undecodable { .. }
                | Self::NotAStore { .. }
                | Self::UnsupportedStoreVersion { .. }
                | Self::StoreMetaCorrupt { .. }
                | Self::StoreRecordCorrupt { .. }
        )
    }
}

/// Shows an optional path, or says the log is in memory.
struct ShowPath<'a>(&'a Option<PathBuf>);

impl fmt::Display for ShowPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}", path.display()),
            None => f.write_str("<log in memory>"),
        }
    }
}

/// Bytes as space-separated hex pairs.
struct Hex<'a>(&'a [u8]);

impl fmt::Display for Hex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, byte) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

/// A list of versions, "1" or "1, 2".
struct List<'a>(&'a [u16]);

impl fmt::Display for List<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, version) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{version}")?;
        }
        Ok(())
    }
}

/// "frame 0 (the header)" or "frame 5 (record 4)".
struct FrameName(u64);

impl fmt::Display for FrameName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("frame 0 (the header)"),
            n => write!(f, "frame {n} (record {})", n - 1),
        }
    }
}

/// "header" or "record".
struct FrameKind(u64);

impl fmt::Display for FrameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0 == 0 { "header" } else { "record" })
    }
}

/// What is left intact before a damaged frame.
struct Intact(u64);

impl fmt::Display for Intact {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            0 => f.write_str("no record precedes it"),
            1 => f.write_str("the 1 earlier record is intact"),
            n => write!(f, "the {n} earlier records are intact"),
        }
    }
}
