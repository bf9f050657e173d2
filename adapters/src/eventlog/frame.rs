//! The byte framing shared by the `.nwlog` file and the redb store.
//!
//! A frame is
//!
//! ```text
//! offset  size  field
//! 0       4     payload length, u32 little-endian, at most MAX_FRAME_PAYLOAD; from format 4
//!               on, its top bit (PACKED) says the payload is stored compressed
//! 4       4     CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320) of the stored payload
//! 8       len   payload
//! ```
//!
//! A packed payload is the uncompressed length (u32 LE) and an LZ4 block of the payload
//! ([`encode_packed_value_frame`] packs a payload of [`PACK_MIN_PAYLOAD`] bytes or more when that
//! makes it shorter). The checksum covers the payload as stored, so damage is found before
//! anything is decompressed; a packed frame's is XORed with [`PACKED_CHECKSUM_MASK`], so a
//! flipped flag fails the checksum too. A damaged length field is still caught: a longer or
//! shorter payload fails the checksum, a length over the maximum is refused before anything is
//! allocated, and a length pointing past the end of the file reads as a torn tail.

use std::io::{self, Read};

use serde::Serialize;

/// Bytes before the payload: the length and the checksum.
pub const FRAME_HEAD_LEN: usize = 8;

/// The largest payload a frame may carry: 16 MiB. A larger declared length is reported as
/// corruption, never allocated.
pub const MAX_FRAME_PAYLOAD: u32 = 16 * 1024 * 1024;

/// The top bit of a frame's length field: the payload is stored packed (format 4 on). A
/// payload is never that long, so no frame of an older format has it set.
pub const PACKED: u32 = 1 << 31;

/// XORed into a packed frame's checksum: the flag bit is outside the bytes the CRC covers, and
/// a frame read with the flag flipped must fail its checksum, not unpack garbage.
pub const PACKED_CHECKSUM_MASK: u32 = 0x4b43_4150; // "PACK"

/// Payloads shorter than this are stored as they are: packing gains nothing on them.
pub const PACK_MIN_PAYLOAD: usize = 128;

/// LZ4 writes a byte for at most 255 bytes of output, so a packed payload cannot declare more
/// than this many bytes per byte of its block: a larger size is damage, refused unallocated.
const LZ4_MAX_RATIO: u64 = 255;

/// The room a frame's payload gets before its bytes are read (larger ones grow as they come).
const PREALLOCATED_PAYLOAD: u32 = 64 * 1024;

/// CRC-32 (IEEE) of `bytes`, the checksum used by every frame and every stored value.
pub fn checksum(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

/// What is wrong with a frame that was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameFault {
    /// The input ends inside the frame.
    Torn {
        /// Bytes the frame needs (head, plus payload when the head was complete).
        needed: u64,
        /// Bytes present from the start of the frame to the end of the input.
        available: u64,
    },
    /// The declared payload length is over [`MAX_FRAME_PAYLOAD`].
    TooLarge {
        /// The declared length.
        length: u32,
    },
    /// The payload does not match its checksum.
    Checksum {
        /// The checksum stored in the frame head.
        stored: u32,
        /// The checksum of the payload as read.
        computed: u32,
    },
}

/// Why a value could not be framed.
#[derive(Debug)]
pub enum EncodeFault {
    /// postcard refused the value.
    Postcard(postcard::Error),
    /// The encoding is longer than [`MAX_FRAME_PAYLOAD`].
    TooLarge {
        /// The encoded length.
        length: usize,
    },
}

/// A frame as read: its payload as stored, and whether that is packed ([`unpack`] gives the
/// payload itself).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredFrame {
    pub bytes: Vec<u8>,
    pub packed: bool,
}

impl StoredFrame {
    /// The payload: the stored bytes, unpacked when they are packed.
    pub fn payload(self) -> Result<Vec<u8>, String> {
        if self.packed {
            unpack(&self.bytes)
        } else {
            Ok(self.bytes)
        }
    }
}

/// Why [`read_frame`] stopped.
#[derive(Debug)]
pub enum ReadFault {
    /// The source failed.
    Io(io::Error),
    /// The bytes read are not a sound frame.
    Frame(FrameFault),
}

/// Appends one frame carrying `payload` to `out`.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeFault> {
    let length = payload_length(payload.len())?;
    out.reserve(FRAME_HEAD_LEN + payload.len());
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&checksum(payload).to_le_bytes());
    out.extend_from_slice(payload);
    Ok(())
}

/// Appends one frame carrying the postcard encoding of `value` to `out`, encoding in place.
/// On failure `out` is left as it was.
pub fn encode_value_frame<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), EncodeFault> {
    let start = out.len();
    out.extend_from_slice(&[0; FRAME_HEAD_LEN]);
    let payload_start = out.len();
    if let Err(error) = postcard::to_extend(value, Appender(out)) {
        out.truncate(start);
        return Err(EncodeFault::Postcard(error));
    }
    let payload = out.get(payload_start..).unwrap_or_default();
    let length = match payload_length(payload.len()) {
        Ok(length) => length,
        Err(fault) => {
            out.truncate(start);
            return Err(fault);
        }
    };
    let crc = checksum(payload);
    let head = length.to_le_bytes().into_iter().chain(crc.to_le_bytes());
    for (slot, byte) in out.iter_mut().skip(start).zip(head) {
        *slot = byte;
    }
    Ok(())
}

/// [`encode_value_frame`], with the payload packed when it is [`PACK_MIN_PAYLOAD`] bytes or
/// more and packing makes it shorter (format 4 on). On failure `out` is left as it was.
pub fn encode_packed_value_frame<T: Serialize + ?Sized>(
    value: &T,
    out: &mut Vec<u8>,
) -> Result<(), EncodeFault> {
    let start = out.len();
    encode_value_frame(value, out)?;
    let payload = out.get(start + FRAME_HEAD_LEN..).unwrap_or_default();
    let Some(packed) = pack(payload) else {
        return Ok(());
    };
    // Shorter than a payload that fit, so its length fits below the flag.
    let length = payload_length(packed.len())? | PACKED;
    out.truncate(start);
    out.extend_from_slice(&length.to_le_bytes());
    out.extend_from_slice(&(checksum(&packed) ^ PACKED_CHECKSUM_MASK).to_le_bytes());
    out.extend_from_slice(&packed);
    Ok(())
}

/// `payload` packed (its length, u32 LE, then an LZ4 block of it), when it is
/// [`PACK_MIN_PAYLOAD`] bytes or more and packing makes it shorter.
pub fn pack(payload: &[u8]) -> Option<Vec<u8>> {
    if payload.len() < PACK_MIN_PAYLOAD {
        return None;
    }
    let packed = lz4_flex::block::compress_prepend_size(payload);
    (packed.len() < payload.len()).then_some(packed)
}

/// The payload a packed one holds. `Err` says why it cannot be unpacked (a size over the
/// maximum or beyond what its block can hold, a damaged block): the checksum matched, so the
/// writer was not this format's.
pub fn unpack(stored: &[u8]) -> Result<Vec<u8>, String> {
    let [s0, s1, s2, s3, block @ ..] = stored else {
        return Err(format!(
            "its packed payload is {} bytes, shorter than its 4-byte size",
            stored.len()
        ));
    };
    let size = u32::from_le_bytes([*s0, *s1, *s2, *s3]);
    if size > MAX_FRAME_PAYLOAD || u64::from(size) > LZ4_MAX_RATIO * (block.len() as u64 + 1) {
        return Err(format!(
            "its packed payload declares {size} bytes, more than a frame holds or its {} \
             bytes of LZ4 can make",
            block.len()
        ));
    }
    let mut payload = vec![0u8; size as usize];
    match lz4_flex::block::decompress_into(block, &mut payload) {
        Ok(n) if n == payload.len() => Ok(payload),
        Ok(n) => Err(format!(
            "its packed payload declares {size} bytes and unpacks to {n}"
        )),
        Err(error) => Err(format!("its packed payload does not unpack: {error}")),
    }
}

/// Lets postcard append to a borrowed vector, so a failed encoding can be cut off again.
struct Appender<'a>(&'a mut Vec<u8>);

impl Extend<u8> for Appender<'_> {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, iter: I) {
        self.0.extend(iter);
    }
}

/// Reads one frame from `src`, returning its payload as stored, or `None` when `src` is at its
/// end exactly on a frame boundary.
///
/// Allocation is bounded by the bytes actually present: a damaged length within the maximum
/// does not reserve memory ahead of reading.
pub fn read_frame<S: Read + ?Sized>(src: &mut S) -> Result<Option<StoredFrame>, ReadFault> {
    let mut head = [0u8; FRAME_HEAD_LEN];
    let got = read_up_to(src, &mut head).map_err(ReadFault::Io)?;
    if got == 0 {
        return Ok(None);
    }
    if got < FRAME_HEAD_LEN {
        return Err(ReadFault::Frame(FrameFault::Torn {
            needed: FRAME_HEAD_LEN as u64,
            available: got as u64,
        }));
    }
    let [l0, l1, l2, l3, c0, c1, c2, c3] = head;
    let field = u32::from_le_bytes([l0, l1, l2, l3]);
    let stored = u32::from_le_bytes([c0, c1, c2, c3]);
    let packed = field & PACKED != 0;
    let length = field & !PACKED;
    if length > MAX_FRAME_PAYLOAD {
        return Err(ReadFault::Frame(FrameFault::TooLarge { length: field }));
    }
    // Room for the whole payload up front (one allocation, one copy), up to a bound: a length
    // that corruption made large is not allocated before the bytes are there.
    let mut payload = Vec::with_capacity(length.min(PREALLOCATED_PAYLOAD) as usize);
    let read = src
        .take(u64::from(length))
        .read_to_end(&mut payload)
        .map_err(ReadFault::Io)?;
    if (read as u64) < u64::from(length) {
        return Err(ReadFault::Frame(FrameFault::Torn {
            needed: FRAME_HEAD_LEN as u64 + u64::from(length),
            available: (FRAME_HEAD_LEN + read) as u64,
        }));
    }
    let mask = if packed { PACKED_CHECKSUM_MASK } else { 0 };
    let computed = checksum(&payload) ^ mask;
    if computed != stored {
        return Err(ReadFault::Frame(FrameFault::Checksum { stored, computed }));
    }
    Ok(Some(StoredFrame {
        bytes: payload,
        packed,
    }))
}

/// Encodes `value` as a stored value: CRC-32 of the payload (u32 LE), then the postcard payload.
/// This is a frame without its length, for containers (redb) that keep lengths themselves.
pub fn encode_checked_value<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, EncodeFault> {
    let mut out = vec![0u8; 4];
    postcard::to_extend(value, Appender(&mut out)).map_err(EncodeFault::Postcard)?;
    let payload = out.get(4..).unwrap_or_default();
    payload_length(payload.len())?;
    let crc = checksum(payload);
    for (slot, byte) in out.iter_mut().zip(crc.to_le_bytes()) {
        *slot = byte;
    }
    Ok(out)
}

/// Splits a stored value into its verified payload. `Err` says what is wrong.
pub fn check_value(bytes: &[u8]) -> Result<&[u8], String> {
    match bytes {
        [c0, c1, c2, c3, payload @ ..] => {
            let stored = u32::from_le_bytes([*c0, *c1, *c2, *c3]);
            let computed = checksum(payload);
            if stored == computed {
                Ok(payload)
            } else {
                Err(format!(
                    "it fails its checksum (stored 0x{stored:08x}, computed 0x{computed:08x})"
                ))
            }
        }
        _ => Err(format!(
            "it is {} bytes long, shorter than its 4-byte checksum",
            bytes.len()
        )),
    }
}

/// Decodes a postcard payload that must be consumed entirely.
pub fn decode_payload<T: serde::de::DeserializeOwned>(payload: &[u8]) -> Result<T, String> {
    match postcard::take_from_bytes::<T>(payload) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(format!(
            "{} bytes are left over after the value",
            rest.len()
        )),
        Err(error) => Err(error.to_string()),
    }
}

fn payload_length(length: usize) -> Result<u32, EncodeFault> {
    match u32::try_from(length) {
        Ok(l) if l <= MAX_FRAME_PAYLOAD => Ok(l),
        _ => Err(EncodeFault::TooLarge { length }),
    }
}

/// Fills `buf` from `src` until it is full or `src` ends; returns the bytes read.
pub(crate) fn read_up_to<S: Read + ?Sized>(src: &mut S, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        let Some(rest) = buf.get_mut(filled..) else {
            break;
        };
        match src.read(rest) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(filled)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn checksum_is_crc32_ieee() {
        // The standard check value of CRC-32/ISO-HDLC (the IEEE 802.3 CRC).
        assert_eq!(checksum(b"123456789"), 0xCBF4_3926);
        assert_eq!(checksum(b""), 0);
    }

    #[test]
    fn frame_layout_is_length_crc_payload() {
        let mut out = Vec::new();
        encode_frame(b"abc", &mut out).unwrap();
        assert_eq!(&out[0..4], &3u32.to_le_bytes());
        assert_eq!(&out[4..8], &checksum(b"abc").to_le_bytes());
        assert_eq!(&out[8..], b"abc");
    }

    #[test]
    fn value_frame_equals_frame_of_postcard_bytes() {
        let value = (7u64, String::from("pod"), vec![1u16, 300]);
        let mut direct = vec![0xAA];
        encode_value_frame(&value, &mut direct).unwrap();
        let mut expected = vec![0xAA];
        encode_frame(&postcard::to_stdvec(&value).unwrap(), &mut expected).unwrap();
        assert_eq!(direct, expected);
    }

    struct Refuses;

    impl Serialize for Refuses {
        fn serialize<S: serde::Serializer>(&self, _: S) -> Result<S::Ok, S::Error> {
            Err(serde::ser::Error::custom("refused"))
        }
    }

    #[test]
    fn failed_encoding_leaves_the_buffer_as_it_was() {
        let mut out = vec![1, 2, 3];
        assert!(matches!(
            encode_value_frame(&Refuses, &mut out),
            Err(EncodeFault::Postcard(_))
        ));
        assert_eq!(out, [1, 2, 3]);
        let big = vec![0u8; MAX_FRAME_PAYLOAD as usize + 1];
        assert!(matches!(
            encode_value_frame(&big, &mut out),
            Err(EncodeFault::TooLarge { .. })
        ));
        assert_eq!(out, [1, 2, 3]);
        assert!(encode_checked_value(&Refuses).is_err());
    }

    #[test]
    fn read_back_and_clean_end() {
        let mut bytes = Vec::new();
        encode_frame(b"one", &mut bytes).unwrap();
        encode_frame(b"", &mut bytes).unwrap();
        let mut src = &bytes[..];
        let plain = |bytes: &[u8]| StoredFrame {
            bytes: bytes.to_vec(),
            packed: false,
        };
        assert_eq!(read_frame(&mut src).unwrap().unwrap(), plain(b"one"));
        assert_eq!(read_frame(&mut src).unwrap().unwrap(), plain(b""));
        assert!(read_frame(&mut src).unwrap().is_none());
    }

    #[test]
    fn large_payloads_are_packed_and_read_back() {
        // A launch's options: the same zones and families again and again.
        let value: Vec<(String, String)> = (0..200)
            .map(|i| {
                (
                    format!("m5.{}xlarge", i % 7),
                    format!("us-east-1{}", ["a", "b", "c"][i % 3]),
                )
            })
            .collect();
        let mut bytes = Vec::new();
        encode_packed_value_frame(&value, &mut bytes).unwrap();
        let encoded = postcard::to_stdvec(&value).unwrap();
        let field = u32::from_le_bytes(bytes[..4].try_into().unwrap());
        assert_ne!(field & PACKED, 0, "packed");
        assert!(
            bytes.len() * 3 < encoded.len(),
            "{} of {}",
            bytes.len(),
            encoded.len()
        );
        let frame = read_frame(&mut &bytes[..]).unwrap().unwrap();
        assert!(frame.packed);
        let back: Vec<(String, String)> = decode_payload(&frame.payload().unwrap()).unwrap();
        assert_eq!(back, value);
        // The flag is outside the checksummed bytes, yet a flipped flag fails the checksum:
        // a packed frame read as plain, and a plain one read as packed.
        let mut unflagged = bytes.clone();
        unflagged[3] ^= 0x80;
        assert!(matches!(
            read_frame(&mut &unflagged[..]),
            Err(ReadFault::Frame(FrameFault::Checksum { .. }))
        ));
        let mut plain = Vec::new();
        encode_value_frame(&value, &mut plain).unwrap();
        plain[3] ^= 0x80;
        assert!(matches!(
            read_frame(&mut &plain[..]),
            Err(ReadFault::Frame(FrameFault::Checksum { .. }))
        ));
        // A short payload, or one packing does not shorten, is stored as it is.
        for small in [vec![7u8; 10], (0..=255u8).collect::<Vec<u8>>()] {
            let mut bytes = Vec::new();
            encode_packed_value_frame(&small, &mut bytes).unwrap();
            let mut plain = Vec::new();
            encode_value_frame(&small, &mut plain).unwrap();
            assert_eq!(bytes, plain);
        }
    }

    #[test]
    fn a_packed_payload_that_does_not_unpack_is_refused_with_the_reason() {
        assert!(
            unpack(&[1, 0])
                .unwrap_err()
                .contains("shorter than its 4-byte size")
        );
        // A size over the maximum, or beyond what the block could make, is never allocated.
        let mut huge = (MAX_FRAME_PAYLOAD + 1).to_le_bytes().to_vec();
        huge.extend_from_slice(&[0; 64]);
        assert!(
            unpack(&huge)
                .unwrap_err()
                .contains("more than a frame holds")
        );
        let mut inflated = 1_000_000u32.to_le_bytes().to_vec();
        inflated.extend_from_slice(&[0x10, 0x61]);
        assert!(
            unpack(&inflated)
                .unwrap_err()
                .contains("more than a frame holds")
        );
        // A damaged block, and a block that makes fewer bytes than it declares.
        let good = lz4_flex::block::compress_prepend_size(&[b'x'; 300]);
        let mut short = good.clone();
        short[..4].copy_from_slice(&301u32.to_le_bytes());
        assert!(unpack(&short).is_err());
        let mut cut = good.clone();
        cut.truncate(good.len() - 2);
        assert!(unpack(&cut).is_err());
        assert_eq!(unpack(&good).unwrap(), vec![b'x'; 300]);
    }

    #[test]
    fn too_large_length_is_refused_before_allocation() {
        let mut bytes = (MAX_FRAME_PAYLOAD + 1).to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 4]);
        match read_frame(&mut &bytes[..]) {
            Err(ReadFault::Frame(FrameFault::TooLarge { length })) => {
                assert_eq!(length, MAX_FRAME_PAYLOAD + 1);
            }
            other => panic!("expected TooLarge, got {other:?}"),
        }
        // Exactly the maximum is allowed (and here torn, as the payload is absent).
        let mut bytes = MAX_FRAME_PAYLOAD.to_le_bytes().to_vec();
        bytes.extend_from_slice(&[0; 4]);
        assert!(matches!(
            read_frame(&mut &bytes[..]),
            Err(ReadFault::Frame(FrameFault::Torn { available: 8, .. }))
        ));
    }

    #[test]
    fn torn_head_and_torn_payload() {
        let mut bytes = Vec::new();
        encode_frame(b"payload", &mut bytes).unwrap();
        for cut in 1..bytes.len() {
            match read_frame(&mut &bytes[..cut]) {
                Err(ReadFault::Frame(FrameFault::Torn { needed, available })) => {
                    assert_eq!(available, cut as u64);
                    let want = if cut < FRAME_HEAD_LEN { 8 } else { 15 };
                    assert_eq!(needed, want);
                }
                other => panic!("cut at {cut}: expected Torn, got {other:?}"),
            }
        }
    }

    #[test]
    fn flipped_payload_fails_checksum() {
        let mut bytes = Vec::new();
        encode_frame(b"payload", &mut bytes).unwrap();
        bytes[10] ^= 0x01;
        assert!(matches!(
            read_frame(&mut &bytes[..]),
            Err(ReadFault::Frame(FrameFault::Checksum { .. }))
        ));
    }

    #[test]
    fn checked_values_round_trip_and_detect_damage() {
        let stored = encode_checked_value(&("node-a", 42u64)).unwrap();
        let payload = check_value(&stored).unwrap();
        let back: (String, u64) = decode_payload(payload).unwrap();
        assert_eq!(back, ("node-a".to_string(), 42));
        for i in 0..stored.len() {
            let mut damaged = stored.clone();
            damaged[i] ^= 0x40;
            assert!(check_value(&damaged).is_err(), "flip at {i} went unnoticed");
        }
        assert!(check_value(&[1, 2, 3]).is_err());
    }

    #[test]
    fn decode_refuses_trailing_bytes() {
        let mut payload = postcard::to_stdvec(&5u32).unwrap();
        payload.push(0);
        assert!(decode_payload::<u32>(&payload).is_err());
    }
}
