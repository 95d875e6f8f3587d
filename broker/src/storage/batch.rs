//! Record batch encoding: the bytes a batch occupies in a segment file.
//!
//! Layout (all integers big-endian, like Kafka's wire format):
//!
//! ```text
//! offset  size  field
//!      0     8  base_offset        offset of the first record
//!      8     4  length             bytes that follow this field (whole batch = 12 + length)
//!     12     4  leader_epoch       epoch of the leader that appended the batch
//!     16     1  magic              format version: 1, or 2 for an idempotent producer's batch
//!     17     4  crc                CRC-32C of bytes [0, 17) and [21, end): everything but itself
//!     21     4  record_count       >= 1; record i has offset base_offset + i
//!     25     8  max_timestamp_ms   largest record timestamp (used by time retention)
//!  magic 2 only (an idempotent producer's batch, Kafka's batch header fields of the same names):
//!     33     8  producer_id        >= 0
//!     41     2  producer_epoch     >= 0
//!     43     4  base_sequence      >= 0, the first record's; record i has base_sequence + i
//!                                  (wrapping from i32::MAX to 0)
//!  magic 3 only (a transactional producer's batch or a transaction marker):
//!     47     1  kind               1 transactional records, 2 commit marker, 3 abort marker
//!  33/47/48  …  records            record_count times:
//!                                    timestamp_ms i64, key_length i32 (-1 = null key), key,
//!                                    value_length u32, value
//! ```
//!
//! Batches without a producer keep magic 1, and an idempotent producer's magic 2, byte for
//! byte what they were before producers and then transactions were stored, so logs written
//! before read as they did and their sizes do not change. A marker's one record is Kafka's
//! control record: key version 0 and type (0 abort, 1 commit) as two big-endian i16, value
//! version 0 and the coordinator epoch (i16, i32).
//!
//! Unlike Kafka, the CRC also covers the base offset, length and epoch: Tidewater re-encodes
//! every batch it appends, so it never needs to patch those fields in place, and covering them
//! means any single damaged byte of a batch is detected.

use super::{Batch, ProducerStamp, StampKind, StoredRecord};

/// Bytes of the fixed batch header that precede the records (magic 1), and the prefix of
/// every header that [`BatchHeader::parse`] reads.
pub const HEADER_LEN: usize = 33;
/// Bytes of the header of a producer's batch (magic 2): the fixed header and the producer
/// fields.
pub const PRODUCER_HEADER_LEN: usize = HEADER_LEN + 14;
/// Bytes of the header of a transactional batch or marker (magic 3): the producer header and
/// the kind.
pub const TXN_HEADER_LEN: usize = PRODUCER_HEADER_LEN + 1;
/// Bytes that precede the records' share of `length`: base offset and the length field itself.
pub const LOG_OVERHEAD: usize = 12;
/// Fixed bytes per record besides key and value.
pub const RECORD_OVERHEAD: usize = 16;
/// The batch format version of a batch without a producer.
pub const MAGIC: u8 = 1;
/// The batch format version of an idempotent producer's batch.
pub const MAGIC_PRODUCER: u8 = 2;
/// The batch format version of a transactional producer's batch or a marker.
pub const MAGIC_TXN: u8 = 3;

const CRC_POS: usize = 17;
const CRC_END: usize = CRC_POS + 4;

/// Why a byte range is not a valid batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchError {
    /// Fewer bytes than the header or the declared length need: a torn write at the tail.
    Incomplete,
    /// The bytes are all there but wrong (bad magic, CRC mismatch, inconsistent fields).
    Corrupt(String),
}

/// The fixed fields of a batch header, parsed without reading the records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Offset of the first record.
    pub base_offset: u64,
    /// Total bytes of the batch including the header.
    pub total_len: usize,
    /// Epoch of the leader that appended the batch.
    pub leader_epoch: u32,
    /// Number of records (>= 1).
    pub record_count: u32,
    /// Largest record timestamp in the batch.
    pub max_timestamp_ms: i64,
    /// [`MAGIC`], [`MAGIC_PRODUCER`] when producer fields follow the fixed header, or
    /// [`MAGIC_TXN`] when the kind follows them.
    pub magic: u8,
}

/// Bytes of the header of a batch of `producer` (or of none).
pub fn header_len(producer: Option<ProducerStamp>) -> usize {
    header_len_of_magic(magic_of(producer))
}

/// The magic a batch of `producer` (or of none) is written with.
fn magic_of(producer: Option<ProducerStamp>) -> u8 {
    match producer {
        None => MAGIC,
        Some(p) if p.kind.is_idempotent() => MAGIC_PRODUCER,
        Some(_) => MAGIC_TXN,
    }
}

fn header_len_of_magic(magic: u8) -> usize {
    match magic {
        MAGIC_PRODUCER => PRODUCER_HEADER_LEN,
        MAGIC_TXN => TXN_HEADER_LEN,
        _ => HEADER_LEN,
    }
}

impl BatchHeader {
    /// Where the records start in the batch's bytes.
    pub fn records_start(&self) -> usize {
        header_len_of_magic(self.magic)
    }

    /// Offset one past the last record of the batch.
    pub fn next_offset(&self) -> u64 {
        self.base_offset + u64::from(self.record_count)
    }

    /// Parses the header at the start of `bytes` (which may hold more than this batch). Checks
    /// only what the header alone can tell; the CRC is checked by [`decode`].
    pub fn parse(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
        if bytes.len() < HEADER_LEN {
            return Err(BatchError::Incomplete);
        }
        let length = be_u32(bytes, 8) as usize;
        let magic = bytes[16];
        if !matches!(magic, MAGIC | MAGIC_PRODUCER | MAGIC_TXN) {
            return Err(BatchError::Corrupt(format!("unknown batch magic {magic}")));
        }
        let record_count = be_u32(bytes, 21);
        let records_len = length
            .checked_sub(header_len_of_magic(magic) - LOG_OVERHEAD)
            .ok_or_else(|| {
                BatchError::Corrupt(format!("batch length {length} shorter than its header"))
            })?;
        if record_count == 0 || records_len / RECORD_OVERHEAD < record_count as usize {
            return Err(BatchError::Corrupt(format!(
                "{record_count} records cannot fit in a batch of length {length}"
            )));
        }
        let base_offset = be_u64(bytes, 0);
        if base_offset.checked_add(u64::from(record_count)).is_none() {
            return Err(BatchError::Corrupt(format!(
                "base offset {base_offset} overflows"
            )));
        }
        Ok(BatchHeader {
            base_offset,
            total_len: LOG_OVERHEAD + length,
            leader_epoch: be_u32(bytes, 12),
            record_count,
            max_timestamp_ms: be_i64(bytes, 25),
            magic,
        })
    }
}

/// The producer fields of the batch whose whole bytes (at least its header) are `bytes`, when
/// its magic says it has them. Negative fields are corrupt.
pub fn producer_of(
    bytes: &[u8],
    header: &BatchHeader,
) -> Result<Option<ProducerStamp>, BatchError> {
    if header.magic == MAGIC {
        return Ok(None);
    }
    if bytes.len() < header.records_start() {
        return Err(BatchError::Incomplete);
    }
    let kind = if header.magic == MAGIC_TXN {
        match bytes[PRODUCER_HEADER_LEN] {
            1 => StampKind::Transactional,
            2 => StampKind::Commit,
            3 => StampKind::Abort,
            other => {
                return Err(BatchError::Corrupt(format!(
                    "batch at offset {} has an unknown kind {other}",
                    header.base_offset
                )))
            }
        }
    } else {
        StampKind::Idempotent
    };
    let stamp = ProducerStamp {
        producer_id: be_u64(bytes, HEADER_LEN) as i64,
        producer_epoch: i16::from_be_bytes([bytes[41], bytes[42]]),
        sequence: be_u32(bytes, 43) as i32,
        kind,
    };
    if stamp.producer_id < 0 || stamp.producer_epoch < 0 || stamp.sequence < 0 {
        return Err(BatchError::Corrupt(format!(
            "batch at offset {} has a negative producer field: {stamp:?}",
            header.base_offset
        )));
    }
    Ok(Some(stamp))
}

/// The coordinator epoch of a transaction marker's control record value (value version i16,
/// then the epoch i32; Kafka's `EndTransactionMarker`), `None` when the value is too short.
pub fn control_coordinator_epoch(value: &[u8]) -> Option<i32> {
    let epoch: [u8; 4] = value.get(2..6)?.try_into().ok()?;
    Some(i32::from_be_bytes(epoch))
}

/// The coordinator epoch of the marker batch in `bytes` (its first record's value), `None`
/// for a batch that is not a marker or whose record is cut short.
pub fn marker_coordinator_epoch(bytes: &[u8], header: &BatchHeader) -> Option<i32> {
    if header.magic != MAGIC_TXN || !matches!(bytes.get(PRODUCER_HEADER_LEN), Some(2 | 3)) {
        return None;
    }
    let mut at = header.records_start() + 8;
    let key_len = i32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?);
    at += 4 + usize::try_from(key_len).unwrap_or(0);
    let value_len = u32::from_be_bytes(bytes.get(at..at + 4)?.try_into().ok()?) as usize;
    at += 4;
    control_coordinator_epoch(bytes.get(at..at.checked_add(value_len)?)?)
}

/// Appends one batch to a byte buffer, record by record, without intermediate allocations.
pub struct BatchEncoder<'a> {
    out: &'a mut Vec<u8>,
    start: usize,
    record_count: u32,
    max_timestamp_ms: i64,
}

impl<'a> BatchEncoder<'a> {
    /// Starts a batch without a producer at the end of `out`.
    pub fn new(out: &'a mut Vec<u8>, base_offset: u64, leader_epoch: u32) -> BatchEncoder<'a> {
        BatchEncoder::with_producer(out, base_offset, leader_epoch, None)
    }

    /// Starts a batch at the end of `out`, with the producer's fields when it has one (magic 2).
    pub fn with_producer(
        out: &'a mut Vec<u8>,
        base_offset: u64,
        leader_epoch: u32,
        producer: Option<ProducerStamp>,
    ) -> BatchEncoder<'a> {
        let start = out.len();
        out.extend_from_slice(&base_offset.to_be_bytes());
        out.extend_from_slice(&0u32.to_be_bytes()); // length, patched in finish()
        out.extend_from_slice(&leader_epoch.to_be_bytes());
        out.push(magic_of(producer));
        out.extend_from_slice(&0u32.to_be_bytes()); // crc, patched in finish()
        out.extend_from_slice(&0u32.to_be_bytes()); // record_count, patched in finish()
        out.extend_from_slice(&0i64.to_be_bytes()); // max_timestamp_ms, patched in finish()
        if let Some(stamp) = producer {
            assert!(
                stamp.producer_id >= 0 && stamp.producer_epoch >= 0 && stamp.sequence >= 0,
                "producer fields are never negative: {stamp:?}"
            );
            out.extend_from_slice(&stamp.producer_id.to_be_bytes());
            out.extend_from_slice(&stamp.producer_epoch.to_be_bytes());
            out.extend_from_slice(&stamp.sequence.to_be_bytes());
            match stamp.kind {
                StampKind::Idempotent => {}
                StampKind::Transactional => out.push(1),
                StampKind::Commit => out.push(2),
                StampKind::Abort => out.push(3),
            }
        }
        BatchEncoder {
            out,
            start,
            record_count: 0,
            max_timestamp_ms: i64::MIN,
        }
    }

    /// Adds the next record; its offset is the base offset plus the records pushed before it.
    pub fn push(&mut self, timestamp_ms: i64, key: Option<&[u8]>, value: &[u8]) {
        self.out.extend_from_slice(&timestamp_ms.to_be_bytes());
        match key {
            Some(key) => {
                self.out
                    .extend_from_slice(&(key.len() as i32).to_be_bytes());
                self.out.extend_from_slice(key);
            }
            None => self.out.extend_from_slice(&(-1i32).to_be_bytes()),
        }
        self.out
            .extend_from_slice(&(value.len() as u32).to_be_bytes());
        self.out.extend_from_slice(value);
        self.record_count += 1;
        self.max_timestamp_ms = self.max_timestamp_ms.max(timestamp_ms);
    }

    /// Patches length, count, timestamp and CRC; returns the batch's total size in bytes.
    /// The caller guarantees at least one record and a size below 4 GiB.
    pub fn finish(self) -> usize {
        assert!(self.record_count > 0, "a batch holds at least one record");
        let batch = &mut self.out[self.start..];
        let total_len = batch.len();
        let length = u32::try_from(total_len - LOG_OVERHEAD).expect("batch below 4 GiB");
        batch[8..12].copy_from_slice(&length.to_be_bytes());
        batch[21..25].copy_from_slice(&self.record_count.to_be_bytes());
        batch[25..33].copy_from_slice(&self.max_timestamp_ms.to_be_bytes());
        let crc = batch_crc(batch);
        batch[CRC_POS..CRC_END].copy_from_slice(&crc.to_be_bytes());
        total_len
    }
}

/// Size in bytes a record takes inside a batch.
pub fn record_size(key: Option<&[u8]>, value: &[u8]) -> usize {
    RECORD_OVERHEAD + key.map_or(0, <[u8]>::len) + value.len()
}

/// Encodes a whole batch (used for re-encoding fetched or truncated batches).
pub fn encode(out: &mut Vec<u8>, batch: &Batch) -> usize {
    let mut encoder =
        BatchEncoder::with_producer(out, batch.base_offset, batch.leader_epoch, batch.producer);
    for record in &batch.records {
        encoder.push(record.timestamp_ms, record.key.as_deref(), &record.value);
    }
    encoder.finish()
}

/// Checks the batch at the start of `bytes` (header, CRC, record layout) without allocating;
/// returns its header.
pub fn verify(bytes: &[u8]) -> Result<BatchHeader, BatchError> {
    let header = BatchHeader::parse(bytes)?;
    if bytes.len() < header.total_len {
        return Err(BatchError::Incomplete);
    }
    let batch = &bytes[..header.total_len];
    let stored_crc = be_u32(batch, CRC_POS);
    let actual_crc = batch_crc(batch);
    if stored_crc != actual_crc {
        return Err(BatchError::Corrupt(format!(
            "CRC mismatch at offset {}: stored {stored_crc:#010x}, computed {actual_crc:#010x}",
            header.base_offset
        )));
    }
    producer_of(batch, &header)?;
    walk_records(&header, &batch[header.records_start()..], |_, _, _| {})?;
    Ok(header)
}

/// Decodes and verifies the batch at the start of `bytes`; returns it and its size in bytes.
pub fn decode(bytes: &[u8]) -> Result<(Batch, usize), BatchError> {
    let header = verify(bytes)?;
    let producer = producer_of(bytes, &header)?;
    let mut records = Vec::with_capacity(header.record_count as usize);
    let mut offset = header.base_offset;
    walk_records(
        &header,
        &bytes[header.records_start()..header.total_len],
        |timestamp_ms, key, value| {
            let position = (offset - header.base_offset) as u32;
            records.push(StoredRecord {
                offset,
                leader_epoch: header.leader_epoch,
                timestamp_ms,
                key: key.map(<[u8]>::to_vec),
                value: value.to_vec(),
                producer: producer.map(|p| p.advanced(position)),
            });
            offset += 1;
        },
    )?;
    let batch = Batch {
        base_offset: header.base_offset,
        leader_epoch: header.leader_epoch,
        producer,
        records,
    };
    Ok((batch, header.total_len))
}

/// Calls `visit(timestamp_ms, key, value)` for each record, checking that the records fill the
/// batch exactly and agree with the header's count and max timestamp.
fn walk_records(
    header: &BatchHeader,
    mut rest: &[u8],
    mut visit: impl FnMut(i64, Option<&[u8]>, &[u8]),
) -> Result<(), BatchError> {
    let corrupt =
        |what: &str| BatchError::Corrupt(format!("batch at offset {}: {what}", header.base_offset));
    let mut max_timestamp_ms = i64::MIN;
    for _ in 0..header.record_count {
        if rest.len() < RECORD_OVERHEAD {
            return Err(corrupt("record runs past the batch end"));
        }
        let timestamp_ms = be_i64(rest, 0);
        let key_len = be_u32(rest, 8) as i32;
        rest = &rest[12..];
        let key = match key_len {
            -1 => None,
            len if len >= 0 && (len as usize) + 4 <= rest.len() => {
                let (key, tail) = rest.split_at(len as usize);
                rest = tail;
                Some(key)
            }
            _ => return Err(corrupt("bad key length")),
        };
        if rest.len() < 4 {
            return Err(corrupt("record runs past the batch end"));
        }
        let value_len = be_u32(rest, 0) as usize;
        rest = &rest[4..];
        if value_len > rest.len() {
            return Err(corrupt("bad value length"));
        }
        let (value, tail) = rest.split_at(value_len);
        rest = tail;
        max_timestamp_ms = max_timestamp_ms.max(timestamp_ms);
        visit(timestamp_ms, key, value);
    }
    if !rest.is_empty() {
        return Err(corrupt("trailing bytes after the last record"));
    }
    if max_timestamp_ms != header.max_timestamp_ms {
        return Err(corrupt("max timestamp does not match the records"));
    }
    Ok(())
}

/// CRC-32C over the whole batch except the CRC field itself.
fn batch_crc(batch: &[u8]) -> u32 {
    let crc = crc32c::crc32c(&batch[..CRC_POS]);
    crc32c::crc32c_append(crc, &batch[CRC_END..])
}

fn be_u32(bytes: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
}

fn be_u64(bytes: &[u8], at: usize) -> u64 {
    u64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

fn be_i64(bytes: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample_batch() -> Batch {
        let records = (0..3u64)
            .map(|i| StoredRecord {
                offset: 40 + i,
                leader_epoch: 7,
                timestamp_ms: 1_000 + i as i64,
                key: (i != 1).then(|| format!("k{i}").into_bytes()),
                value: format!("value-{i}").into_bytes(),
                producer: None,
            })
            .collect();
        Batch {
            base_offset: 40,
            leader_epoch: 7,
            producer: None,
            records,
        }
    }

    /// [`sample_batch`] as an idempotent producer's batch whose sequences wrap.
    fn producer_batch() -> Batch {
        let stamp = ProducerStamp {
            producer_id: 1_000_003,
            producer_epoch: 2,
            sequence: i32::MAX - 1,
            kind: StampKind::Idempotent,
        };
        let mut batch = sample_batch();
        batch.producer = Some(stamp);
        for (i, record) in batch.records.iter_mut().enumerate() {
            record.producer = Some(stamp.advanced(i as u32));
        }
        batch
    }

    #[test]
    fn a_batch_without_producer_keeps_the_magic_1_layout() {
        let mut bytes = Vec::new();
        let len = encode(&mut bytes, &sample_batch());
        assert_eq!(bytes[16], MAGIC);
        let records: usize = sample_batch()
            .records
            .iter()
            .map(|r| record_size(r.key.as_deref(), &r.value))
            .sum();
        assert_eq!(len, HEADER_LEN + records);
    }

    #[test]
    fn a_producer_batch_round_trips_with_its_producer_fields() {
        let batch = producer_batch();
        let mut bytes = Vec::new();
        let len = encode(&mut bytes, &batch);
        assert_eq!(bytes[16], MAGIC_PRODUCER);
        assert_eq!(len, encode(&mut Vec::new(), &sample_batch()) + 14);
        assert_eq!(be_u64(&bytes, 33), 1_000_003);
        assert_eq!(i16::from_be_bytes([bytes[41], bytes[42]]), 2);
        assert_eq!(be_u32(&bytes, 43) as i32, i32::MAX - 1);
        let (decoded, decoded_len) = decode(&bytes).unwrap();
        assert_eq!(decoded_len, len);
        assert_eq!(decoded, batch);
        let sequences: Vec<i32> = decoded
            .records
            .iter()
            .map(|r| r.producer.unwrap().sequence)
            .collect();
        assert_eq!(sequences, [i32::MAX - 1, i32::MAX, 0]);
        let header = BatchHeader::parse(&bytes[..HEADER_LEN]).unwrap();
        assert_eq!((header.total_len, header.record_count), (len, 3));
    }

    #[test]
    fn round_trip_keeps_offsets_epoch_keys_and_values() {
        let batch = sample_batch();
        let mut bytes = Vec::new();
        let len = encode(&mut bytes, &batch);
        assert_eq!(len, bytes.len());
        let (decoded, decoded_len) = decode(&bytes).unwrap();
        assert_eq!(decoded_len, len);
        assert_eq!(decoded, batch);
        let header = BatchHeader::parse(&bytes).unwrap();
        assert_eq!(header.next_offset(), 43);
        assert_eq!(header.max_timestamp_ms, 1_002);
    }

    #[test]
    fn truncated_bytes_are_incomplete_not_corrupt() {
        let mut bytes = Vec::new();
        encode(&mut bytes, &sample_batch());
        for cut in [0, 5, HEADER_LEN - 1, HEADER_LEN, bytes.len() - 1] {
            assert_eq!(
                decode(&bytes[..cut]).unwrap_err(),
                BatchError::Incomplete,
                "cut at {cut}"
            );
        }
    }

    #[test]
    fn zeroed_header_is_corrupt() {
        // A preallocated or zero-filled tail must never look like a batch.
        assert!(matches!(decode(&[0u8; 64]), Err(BatchError::Corrupt(_))));
    }

    fn arb_batch() -> impl Strategy<Value = Batch> {
        let record = (
            any::<i64>(),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..16)),
            proptest::collection::vec(any::<u8>(), 0..48),
        );
        let kinds = [
            StampKind::Idempotent,
            StampKind::Transactional,
            StampKind::Commit,
            StampKind::Abort,
        ];
        let producer =
            proptest::option::of((0..i64::MAX, 0..i16::MAX, 0..i32::MAX, 0..4usize).prop_map(
                move |(producer_id, producer_epoch, sequence, kind)| ProducerStamp {
                    producer_id,
                    producer_epoch,
                    sequence,
                    kind: kinds[kind],
                },
            ));
        (
            0u64..u64::MAX / 2,
            any::<u32>(),
            producer,
            proptest::collection::vec(record, 1..6),
        )
            .prop_map(|(base_offset, leader_epoch, producer, records)| Batch {
                base_offset,
                leader_epoch,
                producer,
                records: records
                    .into_iter()
                    .enumerate()
                    .map(|(i, (timestamp_ms, key, value))| StoredRecord {
                        offset: base_offset + i as u64,
                        leader_epoch,
                        timestamp_ms,
                        key,
                        value,
                        producer: producer.map(|p| p.advanced(i as u32)),
                    })
                    .collect(),
            })
    }

    proptest! {
        #[test]
        fn encode_decode_round_trips(batch in arb_batch()) {
            let mut bytes = Vec::new();
            let len = encode(&mut bytes, &batch);
            prop_assert_eq!(len, LOG_OVERHEAD + be_u32(&bytes, 8) as usize);
            let (decoded, decoded_len) = decode(&bytes).unwrap();
            prop_assert_eq!(decoded_len, len);
            prop_assert_eq!(decoded, batch);
        }

        #[test]
        fn any_single_byte_corruption_is_detected(
            batch in arb_batch(),
            position in any::<proptest::sample::Index>(),
            flip in 1u8..=255,
        ) {
            let mut bytes = Vec::new();
            encode(&mut bytes, &batch);
            let at = position.index(bytes.len());
            bytes[at] ^= flip;
            // Trailing bytes model the rest of a segment: a damaged length must not make the
            // decoder accept a batch that ends somewhere else.
            bytes.extend_from_slice(&[0u8; 64]);
            prop_assert!(decode(&bytes).is_err(), "flip {flip:#04x} at byte {at} went unnoticed");
        }
    }
}
