//! The portable `.nwlog` file: what `nodewright simulate --log` and `nodewright log export`
//! write, and what `nodewright replay` reads.
//!
//! ```text
//! offset  size  field
//! 0       8     magic b"NWLOG\r\n\x1a"
//! 8       2     format version, u16 little-endian (1)
//! 10      2     reserved, u16 little-endian, 0 in version 1
//! 12      ...   frame 0: the header (postcard of H)
//! ...     ...   frame k+1: record k (postcard of R), until the end of the file
//! ```
//!
//! Frames are described in [`super::frame`]; the whole format in `docs/event-log.md`.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::iter::FusedIterator;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Header;
use super::error::LogError;
use super::frame::{self, EncodeFault, FRAME_HEAD_LEN, FrameFault, MAX_FRAME_PAYLOAD, ReadFault};
use super::preamble::{FORMAT_VERSION, MAGIC, PREAMBLE_LEN, READABLE_VERSIONS};

/// A byte sink that can make what was written durable: the target of a [`NwlogWriter`].
///
/// For a file that is `sync_data`; for an in-memory buffer there is nothing to do.
pub trait DurableWrite: Write {
    /// Makes everything written so far survive a crash of the process or the machine.
    fn make_durable(&mut self) -> io::Result<()>;
}

impl DurableWrite for File {
    fn make_durable(&mut self) -> io::Result<()> {
        File::sync_data(self)
    }
}

impl DurableWrite for Vec<u8> {
    fn make_durable(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<W: DurableWrite + ?Sized> DurableWrite for &mut W {
    fn make_durable(&mut self) -> io::Result<()> {
        (**self).make_durable()
    }
}

impl<W: DurableWrite> DurableWrite for BufWriter<W> {
    fn make_durable(&mut self) -> io::Result<()> {
        self.flush()?;
        self.get_mut().make_durable()
    }
}

/// Writes a `.nwlog` file: the preamble and header when created, then records in group
/// commits.
///
/// `H` is the header type and `R` the record type; `W` is where the bytes go (a [`File`], or a
/// `Vec<u8>` in tests).
#[derive(Debug)]
pub struct NwlogWriter<H, R, W: DurableWrite = File> {
    out: W,
    path: Option<PathBuf>,
    records: u64,
    bytes: u64,
    failed: bool,
    buffer: Vec<u8>,
    types: PhantomData<fn(&H, &R)>,
}

impl<H: Serialize, R: Serialize> NwlogWriter<H, R, File> {
    /// Creates (or truncates) the file at `path`, writes the preamble and `header`, and makes
    /// them durable, the directory entry included.
    pub fn create(path: impl AsRef<Path>, header: &H) -> Result<Self, LogError> {
        Self::create_with(path.as_ref(), header, false)
    }

    /// As [`Self::create`], but refuses to replace an existing file.
    pub fn create_new(path: impl AsRef<Path>, header: &H) -> Result<Self, LogError> {
        Self::create_with(path.as_ref(), header, true)
    }

    fn create_with(path: &Path, header: &H, new: bool) -> Result<Self, LogError> {
        // Encode before touching the file system, so a header that does not encode leaves no
        // file behind.
        let start = start_bytes(header)?;
        let io_error = |action| {
            let path = path.to_path_buf();
            move |source| LogError::Io {
                path: Some(path),
                action,
                source,
            }
        };
        let mut options = OpenOptions::new();
        options.write(true);
        if new {
            options.create_new(true);
        } else {
            options.create(true).truncate(true);
        }
        let file = options
            .open(path)
            .map_err(io_error("create the log file"))?;
        let mut writer = Self {
            out: file,
            path: Some(path.to_path_buf()),
            records: 0,
            bytes: 0,
            failed: false,
            buffer: Vec::new(),
            types: PhantomData,
        };
        writer.write_durably(&start)?;
        sync_parent_dir(path).map_err(io_error("sync the directory holding the log"))?;
        Ok(writer)
    }
}

impl<H: Serialize, R: Serialize, W: DurableWrite> NwlogWriter<H, R, W> {
    /// Starts a log in `out`: writes the preamble and `header` and makes them durable.
    pub fn new(out: W, header: &H) -> Result<Self, LogError> {
        let start = start_bytes(header)?;
        let mut writer = Self {
            out,
            path: None,
            records: 0,
            bytes: 0,
            failed: false,
            buffer: Vec::new(),
            types: PhantomData,
        };
        writer.write_durably(&start)?;
        Ok(writer)
    }

    /// Appends `records` as one group commit: all frames are written with one write, then
    /// flushed and made durable; when this returns `Ok`, they survive a crash.
    ///
    /// If a record does not encode, nothing is written. If the write itself fails, the file
    /// may end inside a frame (a reader reports it as a torn tail after the intact records),
    /// and this writer refuses further appends.
    pub fn append(&mut self, records: &[R]) -> Result<(), LogError> {
        if self.failed {
            return Err(LogError::WriterFailed {
                path: self.path.clone(),
            });
        }
        if records.is_empty() {
            return Ok(());
        }
        let mut buffer = std::mem::take(&mut self.buffer);
        buffer.clear();
        for (index_in_batch, record) in records.iter().enumerate() {
            if let Err(fault) = frame::encode_packed_value_frame(record, &mut buffer) {
                self.buffer = buffer;
                return Err(encode_error(fault, "record", index_in_batch));
            }
        }
        let result = self.write_durably(&buffer);
        self.buffer = buffer;
        result?;
        self.records += records.len() as u64;
        Ok(())
    }

    /// The number of records written.
    pub fn len(&self) -> u64 {
        self.records
    }

    /// True when no record has been written.
    pub fn is_empty(&self) -> bool {
        self.records == 0
    }

    /// The number of bytes written, preamble and header included.
    pub fn byte_len(&self) -> u64 {
        self.bytes
    }

    /// The file written, if the log is a file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The sink.
    pub fn get_ref(&self) -> &W {
        &self.out
    }

    /// Gives the sink back (for a `Vec<u8>`: the bytes of the log).
    pub fn into_inner(self) -> W {
        self.out
    }

    fn write_durably(&mut self, bytes: &[u8]) -> Result<(), LogError> {
        let result = self
            .out
            .write_all(bytes)
            .and_then(|()| self.out.flush())
            .map_err(|source| (source, "write the log"))
            .and_then(|()| {
                self.out
                    .make_durable()
                    .map_err(|source| (source, "sync the log to disk"))
            });
        match result {
            Ok(()) => {
                self.bytes += bytes.len() as u64;
                Ok(())
            }
            Err((source, action)) => {
                self.failed = true;
                Err(LogError::Io {
                    path: self.path.clone(),
                    action,
                    source,
                })
            }
        }
    }
}

/// The preamble and the header frame.
fn start_bytes<H: Serialize>(header: &H) -> Result<Vec<u8>, LogError> {
    let mut bytes = Vec::with_capacity(256);
    bytes.extend_from_slice(&MAGIC);
    bytes.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    bytes.extend_from_slice(&0u16.to_le_bytes());
    frame::encode_value_frame(header, &mut bytes)
        .map_err(|fault| encode_error(fault, "header", 0))?;
    Ok(bytes)
}

fn encode_error(fault: EncodeFault, what: &'static str, index_in_batch: usize) -> LogError {
    match fault {
        EncodeFault::Postcard(source) => LogError::Encode { what, source },
        EncodeFault::TooLarge { length } => LogError::RecordTooLarge {
            index_in_batch,
            length,
            max: MAX_FRAME_PAYLOAD,
        },
    }
}

#[cfg(unix)]
pub(crate) fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    File::open(parent)?.sync_all()
}

#[cfg(not(unix))]
pub(crate) fn sync_parent_dir(_path: &Path) -> io::Result<()> {
    Ok(())
}

/// One record read from a `.nwlog` file, with where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry<R> {
    /// The index of the record (0 for the first record after the header).
    pub record_index: u64,
    /// The index of its frame (`record_index + 1`: frame 0 is the header).
    pub frame_index: u64,
    /// The byte offset where its frame starts.
    pub byte_offset: u64,
    /// The record.
    pub record: R,
}

/// Reads a `.nwlog` file: the header when opened, then the records one by one.
///
/// As an iterator it yields `Ok(record)` for every intact record, then at most one `Err`
/// describing the first damaged frame, then ends. So a reader of a damaged log still gets the
/// intact prefix.
#[derive(Debug)]
pub struct NwlogReader<H, R, S = BufReader<File>> {
    src: S,
    path: Option<PathBuf>,
    header: H,
    version: u16,
    next_frame: u64,
    next_offset: u64,
    finished: bool,
    records: PhantomData<fn() -> R>,
}

impl<H: Header, R: DeserializeOwned> NwlogReader<H, R, BufReader<File>> {
    /// Opens the file at `path` and reads its preamble and header.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, LogError> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|source| LogError::Io {
            path: Some(path.to_path_buf()),
            action: "open the log for reading",
            source,
        })?;
        Self::start(
            BufReader::with_capacity(64 * 1024, file),
            Some(path.to_path_buf()),
        )
    }
}

impl<H: Header, R: DeserializeOwned, S: Read> NwlogReader<H, R, S> {
    /// Reads the preamble and header from `src` (for example `&bytes[..]`).
    pub fn new(src: S) -> Result<Self, LogError> {
        Self::start(src, None)
    }

    fn start(mut src: S, path: Option<PathBuf>) -> Result<Self, LogError> {
        let version = read_preamble(&mut src, &path)?;
        let offset = PREAMBLE_LEN as u64;
        let stored = match frame::read_frame(&mut src) {
            Ok(Some(stored)) => stored,
            Ok(None) => {
                return Err(LogError::TornTail {
                    path,
                    frame_index: 0,
                    byte_offset: offset,
                    intact_records: 0,
                    needed: FRAME_HEAD_LEN as u64,
                    available: 0,
                });
            }
            Err(fault) => return Err(read_error(fault, path, 0, offset)),
        };
        let stored_len = stored.bytes.len();
        // The header as its version laid it out.
        let header = match stored
            .payload()
            .and_then(|payload| H::decode(version, &payload))
        {
            Ok(header) => header,
            Err(reason) => {
                return Err(LogError::Undecodable {
                    path,
                    frame_index: 0,
                    byte_offset: offset,
                    intact_records: 0,
                    reason,
                });
            }
        };
        Ok(Self {
            src,
            path,
            header,
            version,
            next_frame: 1,
            next_offset: offset + (FRAME_HEAD_LEN + stored_len) as u64,
            finished: false,
            records: PhantomData,
        })
    }

    /// The header.
    pub fn header(&self) -> &H {
        &self.header
    }

    /// Gives the header up, dropping the reader.
    pub fn into_header(self) -> H {
        self.header
    }

    /// The format version in the preamble.
    pub fn format_version(&self) -> u16 {
        self.version
    }

    /// The file read, if the log is a file.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }

    /// The index of the next frame to read (frame 0 is the header).
    pub fn next_frame_index(&self) -> u64 {
        self.next_frame
    }

    /// The byte offset of the next frame to read.
    pub fn next_byte_offset(&self) -> u64 {
        self.next_offset
    }

    /// The number of records read so far.
    pub fn records_read(&self) -> u64 {
        self.next_frame - 1
    }

    /// Reads the next record with its position; `None` at the end of the log, and after an
    /// error.
    pub fn next_entry(&mut self) -> Option<Result<Entry<R>, LogError>> {
        self.next_entry_read(|payload| frame::decode_payload::<R>(&payload))
    }

    /// [`NwlogReader::next_entry`], the record's payload (unpacked) read by `read` instead of
    /// decoded whole: e.g. [`super::ReadRecord::read`], which keeps recorded commands as their
    /// bytes. A `read` error is the frame's [`LogError::Undecodable`].
    pub fn next_entry_read<T>(
        &mut self,
        read: impl FnOnce(Vec<u8>) -> Result<T, String>,
    ) -> Option<Result<Entry<T>, LogError>> {
        if self.finished {
            return None;
        }
        let frame_index = self.next_frame;
        let byte_offset = self.next_offset;
        let stored = match frame::read_frame(&mut self.src) {
            Ok(Some(stored)) => stored,
            Ok(None) => {
                self.finished = true;
                return None;
            }
            Err(fault) => {
                self.finished = true;
                return Some(Err(read_error(
                    fault,
                    self.path.clone(),
                    frame_index,
                    byte_offset,
                )));
            }
        };
        let stored_len = stored.bytes.len();
        // Every version lays records out alike; from version 4 on, a large one may be packed.
        match stored.payload().and_then(read) {
            Ok(record) => {
                self.next_frame += 1;
                self.next_offset += (FRAME_HEAD_LEN + stored_len) as u64;
                Some(Ok(Entry {
                    record_index: frame_index - 1,
                    frame_index,
                    byte_offset,
                    record,
                }))
            }
            Err(reason) => {
                self.finished = true;
                Some(Err(self.undecodable(frame_index, byte_offset, reason)))
            }
        }
    }

    /// The error for the record of the frame at `frame_index` (starting at `byte_offset`) that
    /// does not decode: also for one [`NwlogReader::next_entry_read`] kept partly undecoded and
    /// whose rest turns out not to decode.
    pub fn undecodable(&self, frame_index: u64, byte_offset: u64, reason: String) -> LogError {
        LogError::undecodable(self.path.clone(), frame_index, byte_offset, reason)
    }

    /// Reads every record; fails at the first damaged frame.
    pub fn read_to_end(mut self) -> Result<(H, Vec<R>), LogError> {
        let mut records = Vec::new();
        for record in &mut self {
            records.push(record?);
        }
        Ok((self.header, records))
    }
}

impl<H: Header, R: DeserializeOwned, S: Read> Iterator for NwlogReader<H, R, S> {
    type Item = Result<R, LogError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry()
            .map(|entry| entry.map(|entry| entry.record))
    }
}

impl<H: Header, R: DeserializeOwned, S: Read> FusedIterator for NwlogReader<H, R, S> {}

/// Reads a whole `.nwlog` file; fails at the first damaged frame. To keep the intact prefix of
/// a damaged log, iterate a [`NwlogReader`] instead.
pub fn read_nwlog<H: Header, R: DeserializeOwned>(
    path: impl AsRef<Path>,
) -> Result<(H, Vec<R>), LogError> {
    NwlogReader::<H, R>::open(path)?.read_to_end()
}

/// Reads a whole `.nwlog` image held in memory; fails at the first damaged frame. Never
/// panics, whatever the bytes.
pub fn read_nwlog_bytes<H: Header, R: DeserializeOwned>(
    bytes: &[u8],
) -> Result<(H, Vec<R>), LogError> {
    NwlogReader::<H, R, &[u8]>::new(bytes)?.read_to_end()
}

fn read_preamble<S: Read>(src: &mut S, path: &Option<PathBuf>) -> Result<u16, LogError> {
    let mut preamble = [0u8; PREAMBLE_LEN];
    let got = frame::read_up_to(src, &mut preamble).map_err(|source| LogError::Io {
        path: path.clone(),
        action: "read the preamble",
        source,
    })?;
    let magic_got = got.min(MAGIC.len());
    let found = preamble.get(..magic_got).unwrap_or_default();
    if MAGIC.get(..magic_got) != Some(found) {
        return Err(LogError::NotNwlog {
            path: path.clone(),
            found: found.to_vec(),
        });
    }
    if got < PREAMBLE_LEN {
        return Err(LogError::TruncatedPreamble {
            path: path.clone(),
            length: got as u64,
        });
    }
    let [_, _, _, _, _, _, _, _, v0, v1, r0, r1] = preamble;
    let version = u16::from_le_bytes([v0, v1]);
    let reserved = u16::from_le_bytes([r0, r1]);
    if !READABLE_VERSIONS.contains(&version) {
        return Err(LogError::UnsupportedVersion {
            path: path.clone(),
            version,
            supported: READABLE_VERSIONS,
        });
    }
    if reserved != 0 {
        return Err(LogError::ReservedNotZero {
            path: path.clone(),
            version,
            value: reserved,
        });
    }
    Ok(version)
}

fn read_error(
    fault: ReadFault,
    path: Option<PathBuf>,
    frame_index: u64,
    byte_offset: u64,
) -> LogError {
    let intact_records = frame_index.saturating_sub(1);
    match fault {
        ReadFault::Io(source) => LogError::Io {
            path,
            action: "read the log",
            source,
        },
        ReadFault::Frame(FrameFault::Torn { needed, available }) => LogError::TornTail {
            path,
            frame_index,
            byte_offset,
            intact_records,
            needed,
            available,
        },
        ReadFault::Frame(FrameFault::Checksum { stored, computed }) => LogError::ChecksumMismatch {
            path,
            frame_index,
            byte_offset,
            intact_records,
            stored,
            computed,
        },
        ReadFault::Frame(FrameFault::TooLarge { length }) => LogError::FrameTooLarge {
            path,
            frame_index,
            byte_offset,
            intact_records,
            length: u64::from(length),
            max: MAX_FRAME_PAYLOAD,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Header for u8 {}

    #[test]
    fn preamble_bytes_are_as_documented() {
        let writer = NwlogWriter::<u8, u8, Vec<u8>>::new(Vec::new(), &7).unwrap();
        let bytes = writer.into_inner();
        assert_eq!(&bytes[..8], b"NWLOG\r\n\x1a");
        assert_eq!(&bytes[8..10], &[8, 0]);
        assert_eq!(&bytes[10..12], &[0, 0]);
        // Frame 0: length 1, CRC of [7], payload [7].
        assert_eq!(&bytes[12..16], &[1, 0, 0, 0]);
        assert_eq!(&bytes[16..20], &frame::checksum(&[7]).to_le_bytes());
        assert_eq!(&bytes[20..], &[7]);
    }

    /// The worked example of `docs/event-log.md`, byte for byte: if this changes, the format
    /// changed, and old logs would no longer read. Versions 1 to 8 frame these alike (small
    /// payloads are never packed; only nodewright's header layout and event kinds differ), so
    /// the same bytes under versions 1 to 7 still read.
    #[test]
    fn format_version_8_golden_bytes() {
        let mut writer = NwlogWriter::<u8, String, Vec<u8>>::new(Vec::new(), &7).unwrap();
        writer
            .append(&["a".to_string(), "bcd".to_string()])
            .unwrap();
        #[rustfmt::skip]
        let golden: [u8; 43] = [
            0x4e, 0x57, 0x4c, 0x4f, 0x47, 0x0d, 0x0a, 0x1a, 0x08, 0x00, 0x00, 0x00, // preamble
            0x01, 0x00, 0x00, 0x00, 0x2e, 0x7a, 0x66, 0x4c, 0x07, // frame 0: header 7u8
            0x02, 0x00, 0x00, 0x00, 0x70, 0x72, 0x77, 0x62, 0x01, 0x61, // frame 1: "a"
            0x04, 0x00, 0x00, 0x00, 0x99, 0xf2, 0xad, 0x7c, 0x03, 0x62, 0x63, 0x64, // frame 2
        ];
        assert_eq!(writer.into_inner(), golden);
        let (header, records) = read_nwlog_bytes::<u8, String>(&golden).unwrap();
        assert_eq!(
            (header, records),
            (7, vec!["a".to_string(), "bcd".to_string()])
        );
        // The framing is that of versions 1 to 7: they read the same.
        for older in [0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07] {
            let mut bytes = golden;
            bytes[8] = older;
            let (header, records) = read_nwlog_bytes::<u8, String>(&bytes).unwrap();
            assert_eq!(
                (header, records),
                (7, vec!["a".to_string(), "bcd".to_string()])
            );
        }
    }

    #[test]
    fn empty_append_writes_nothing() {
        let mut writer = NwlogWriter::<u8, u8, Vec<u8>>::new(Vec::new(), &7).unwrap();
        let before = writer.byte_len();
        writer.append(&[]).unwrap();
        assert_eq!(writer.byte_len(), before);
        assert!(writer.is_empty());
    }

    #[test]
    fn positions_are_reported() {
        let mut writer = NwlogWriter::<u8, String, Vec<u8>>::new(Vec::new(), &7).unwrap();
        writer
            .append(&["a".to_string(), "bcd".to_string()])
            .unwrap();
        let bytes = writer.into_inner();
        let mut reader = NwlogReader::<u8, String, _>::new(&bytes[..]).unwrap();
        let first = reader.next_entry().unwrap().unwrap();
        assert_eq!(
            (first.record_index, first.frame_index, first.byte_offset),
            (0, 1, 21)
        );
        let second = reader.next_entry().unwrap().unwrap();
        // 21 + 8-byte head + 2-byte payload (length varint, 'a').
        assert_eq!(
            (second.record_index, second.frame_index, second.byte_offset),
            (1, 2, 31)
        );
        assert_eq!(second.record, "bcd");
        assert!(reader.next_entry().is_none());
        assert!(reader.next_entry().is_none());
        assert_eq!(reader.records_read(), 2);
        assert_eq!(reader.next_byte_offset() as usize, bytes.len());
    }

    /// A sink that fails after `budget` bytes.
    struct Failing {
        budget: usize,
        bytes: Vec<u8>,
    }

    impl Write for Failing {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.budget == 0 {
                return Err(io::Error::other("disk full"));
            }
            let n = buf.len().min(self.budget);
            self.budget -= n;
            self.bytes.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    impl DurableWrite for Failing {
        fn make_durable(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_failed_write_stops_the_writer_and_leaves_a_torn_tail() {
        let sink = Failing {
            // Preamble and header: 21 bytes; each u64 record below 128: a 9-byte frame.
            // 21 + 2 * 9 + 9 + 4: the second append gets record 3 whole and 4 bytes of record 4.
            budget: 52,
            bytes: Vec::new(),
        };
        let mut writer = NwlogWriter::<u8, u64, _>::new(sink, &1).unwrap();
        writer.append(&[1, 2]).unwrap();
        assert!(matches!(
            writer.append(&[3, 4, 5]),
            Err(LogError::Io { .. })
        ));
        assert!(matches!(
            writer.append(&[6]),
            Err(LogError::WriterFailed { .. })
        ));
        assert_eq!(writer.len(), 2);
        let bytes = writer.into_inner().bytes;
        let mut reader = NwlogReader::<u8, u64, _>::new(&bytes[..]).unwrap();
        assert_eq!(reader.next().unwrap().unwrap(), 1);
        assert_eq!(reader.next().unwrap().unwrap(), 2);
        // Record 3 (frame 3) survived whole; record 4 is torn.
        assert_eq!(reader.next().unwrap().unwrap(), 3);
        let error = reader.next().unwrap().unwrap_err();
        assert!(
            matches!(error, LogError::TornTail { frame_index: 4, .. }),
            "{error}"
        );
    }

    #[test]
    fn records_of_another_type_are_undecodable_not_corrupt() {
        let mut writer = NwlogWriter::<u8, String, Vec<u8>>::new(Vec::new(), &1).unwrap();
        writer.append(&["not a number".to_string()]).unwrap();
        let bytes = writer.into_inner();
        let error = read_nwlog_bytes::<u8, bool>(&bytes).unwrap_err();
        assert!(
            matches!(
                error,
                LogError::Undecodable {
                    frame_index: 1,
                    intact_records: 0,
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("does not decode as a v1 record"));
    }
}
