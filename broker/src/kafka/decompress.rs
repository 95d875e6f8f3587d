//! Decompression of a produced batch's records, capped at `max.message.bytes` of
//! *uncompressed* data and streaming, so a small compressed request cannot make the broker
//! hold gigabytes (a gzip or snappy bomb) before any limit is checked.
//!
//! Kafka reads a compressed batch record by record through a decompressing stream and never
//! holds more of it than it reads; this broker decodes a batch's records at once, so it reads
//! the stream into a buffer that may never grow past the cap. Snappy (in the xerial framing
//! Kafka's clients write, or raw) states each block's uncompressed length before the block:
//! that length is checked against what remains of the cap before anything is allocated.

use std::io::Read;

use bytes::Bytes;
use kafka_protocol::records::Compression;

/// Why a batch's records could not be decompressed.
#[derive(Debug, PartialEq, Eq)]
pub enum DecompressError {
    /// The records would be larger than the cap once decompressed (MESSAGE_TOO_LARGE).
    TooLarge {
        /// The cap: the topic's `max.message.bytes`.
        max_bytes: u64,
    },
    /// The compressed bytes are not a valid stream of their codec (CORRUPT_MESSAGE).
    Corrupt(String),
    /// A codec this build does not decode.
    Unsupported(Compression),
}

impl std::fmt::Display for DecompressError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::TooLarge { max_bytes } => write!(
                f,
                "the batch's records are more than max.message.bytes={max_bytes} bytes once \
                 decompressed"
            ),
            Self::Corrupt(why) => write!(f, "the compressed records do not decompress: {why}"),
            Self::Unsupported(codec) => write!(f, "{codec:?} batches are not decoded here"),
        }
    }
}

/// The snappy-java stream header Kafka's clients write before xerial-framed blocks.
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
/// The header's full length: the magic, then a version and a compatible version (4 bytes each).
const XERIAL_HEADER_BYTES: usize = 16;

/// Decompresses `raw` (a batch's records as compressed by `compression`) into at most
/// `max_bytes` bytes, or says why not.
/// Uncompressed records are handed back as they are (no copy on the produce path).
pub fn decompress_capped(
    raw: Bytes,
    compression: Compression,
    max_bytes: u64,
) -> Result<Bytes, DecompressError> {
    match compression {
        Compression::None => {
            if raw.len() as u64 > max_bytes {
                return Err(DecompressError::TooLarge { max_bytes });
            }
            Ok(raw)
        }
        Compression::Gzip => gunzip_capped(&raw, max_bytes),
        Compression::Snappy => unsnappy_capped(&raw, max_bytes),
        other => Err(DecompressError::Unsupported(other)),
    }
}

/// Gzip, as Java's GZIPInputStream reads it (concatenated members too), through a reader
/// that stops one byte past the cap.
fn gunzip_capped(raw: &[u8], max_bytes: u64) -> Result<Bytes, DecompressError> {
    let mut plain = Vec::new();
    flate2::read::MultiGzDecoder::new(raw)
        .take(max_bytes.saturating_add(1))
        .read_to_end(&mut plain)
        .map_err(|e| DecompressError::Corrupt(format!("gzip: {e}")))?;
    if plain.len() as u64 > max_bytes {
        return Err(DecompressError::TooLarge { max_bytes });
    }
    Ok(Bytes::from(plain))
}

/// Snappy: xerial-framed blocks when the stream starts with snappy-java's header, otherwise
/// one raw snappy block (snappy-java reads both).
fn unsnappy_capped(raw: &[u8], max_bytes: u64) -> Result<Bytes, DecompressError> {
    if !raw.starts_with(XERIAL_MAGIC) {
        let mut plain = Vec::new();
        append_block(raw, max_bytes, &mut plain)?;
        return Ok(Bytes::from(plain));
    }
    let mut rest = raw
        .get(XERIAL_HEADER_BYTES..)
        .ok_or_else(|| DecompressError::Corrupt("snappy: truncated stream header".into()))?;
    let mut plain = Vec::new();
    while !rest.is_empty() {
        let (length, after) = rest
            .split_first_chunk::<4>()
            .ok_or_else(|| DecompressError::Corrupt("snappy: truncated block length".into()))?;
        let length = u32::from_be_bytes(*length) as usize;
        let block = after.get(..length).ok_or_else(|| {
            DecompressError::Corrupt(format!(
                "snappy: a block of {length} bytes with {} left",
                after.len()
            ))
        })?;
        append_block(block, max_bytes, &mut plain)?;
        rest = &after[length..];
    }
    Ok(Bytes::from(plain))
}

/// Decompresses one raw snappy block onto `plain`, refusing before any allocation a block
/// whose stated length would take `plain` past `max_bytes`.
fn append_block(block: &[u8], max_bytes: u64, plain: &mut Vec<u8>) -> Result<(), DecompressError> {
    let length = snap::raw::decompress_len(block)
        .map_err(|e| DecompressError::Corrupt(format!("snappy: {e}")))?;
    if (plain.len() as u64).saturating_add(length as u64) > max_bytes {
        return Err(DecompressError::TooLarge { max_bytes });
    }
    let start = plain.len();
    plain.resize(start + length, 0);
    let written = snap::raw::Decoder::new()
        .decompress(block, &mut plain[start..])
        .map_err(|e| DecompressError::Corrupt(format!("snappy: {e}")))?;
    assert!(written <= length, "snappy wrote past the length it stated");
    plain.truncate(start + written);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    fn xerial(blocks: &[&[u8]]) -> Vec<u8> {
        let mut out = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
        for block in blocks {
            let compressed = snap::raw::Encoder::new().compress_vec(block).unwrap();
            out.extend_from_slice(&(compressed.len() as u32).to_be_bytes());
            out.extend_from_slice(&compressed);
        }
        out
    }

    #[test]
    fn gzip_within_the_cap_decompresses_whole() {
        let data = vec![7u8; 10_000];
        let plain = decompress_capped(gzip(&data).into(), Compression::Gzip, 10_000).unwrap();
        assert_eq!(&plain[..], &data[..]);
    }

    #[test]
    fn a_gzip_bomb_is_refused_at_the_cap_without_inflating_it() {
        // 64 MiB of zeros compress to about 64 KiB; the cap is 1 MiB.
        let bomb = gzip(&vec![0u8; 64 << 20]);
        assert!(bomb.len() < 100_000, "{}", bomb.len());
        let err = decompress_capped(bomb.into(), Compression::Gzip, 1 << 20).unwrap_err();
        assert_eq!(err, DecompressError::TooLarge { max_bytes: 1 << 20 });
    }

    #[test]
    fn snappy_blocks_are_checked_against_what_remains_of_the_cap() {
        let block = vec![1u8; 32 * 1024];
        let framed = xerial(&[&block, &block]);
        let plain =
            decompress_capped(framed.clone().into(), Compression::Snappy, 64 * 1024).unwrap();
        assert_eq!(plain.len(), 64 * 1024);
        let err = decompress_capped(framed.into(), Compression::Snappy, 64 * 1024 - 1).unwrap_err();
        assert_eq!(
            err,
            DecompressError::TooLarge {
                max_bytes: 64 * 1024 - 1
            }
        );
    }

    #[test]
    fn a_raw_snappy_block_stating_a_huge_length_is_refused_before_allocating() {
        // A raw snappy block starts with its uncompressed length as a varint: 2^31 here,
        // in five bytes. Refused on the stated length, before any room is made for it.
        let lying = [0x80, 0x80, 0x80, 0x80, 0x08, 0x00];
        let err = decompress_capped(Bytes::copy_from_slice(&lying), Compression::Snappy, 1 << 20)
            .unwrap_err();
        assert_eq!(err, DecompressError::TooLarge { max_bytes: 1 << 20 });
        let raw = snap::raw::Encoder::new().compress_vec(b"hello").unwrap();
        assert_eq!(
            &decompress_capped(raw.into(), Compression::Snappy, 5).unwrap()[..],
            b"hello"
        );
    }

    #[test]
    fn garbage_is_corrupt_not_a_panic() {
        for codec in [Compression::Gzip, Compression::Snappy] {
            let err = decompress_capped(Bytes::from_static(b"\x1f\x8b\x08garbage"), codec, 1 << 20)
                .unwrap_err();
            assert!(
                matches!(err, DecompressError::Corrupt(_)),
                "{codec:?}: {err:?}"
            );
        }
    }
}
