//! The fixed head of a `.nwlog` file: its signature and versions, which the reader checks and
//! the errors quote.

/// The first eight bytes of every `.nwlog` file. Like PNG's signature: a non-ASCII-looking
/// name, then CR LF (a text-mode copy that rewrites line ends breaks it visibly), then
/// Ctrl-Z (stops `type` on DOS-like consoles).
pub const MAGIC: [u8; 8] = *b"NWLOG\r\n\x1a";

/// The format version this build writes.
pub const FORMAT_VERSION: u16 = 8;

/// The format versions this build reads. A new version is added here, never removed.
pub const READABLE_VERSIONS: &[u16] = &[1, 2, 3, 4, 5, 6, 7, 8];

/// Bytes before frame 0: magic, version, reserved.
pub const PREAMBLE_LEN: usize = 12;
