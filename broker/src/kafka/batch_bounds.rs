//! Bounds on a produced v2 record batch before the `kafka-protocol` crate decodes it.
//!
//! The crate's record decoder reserves room for `record_count` records, and for each record
//! room for its header count, before reading any of them; a 70-byte produce with a correct
//! CRC and a record count of 0x7FFFFFFF (or one record with 2^30 headers) aborted the broker
//! (issue 22). [`check_header`] checks the batch's fixed header (size, magic, CRC),
//! [`check_offset_range`] its offset range against its record count (as Kafka does), and
//! [`check_records`] walks the records themselves (each record's size, key, value and
//! headers within the bytes the batch holds, exactly `record_count` of them), so the counts
//! the crate trusts are the ones actually present. The refusals carry Kafka's error:
//! `CORRUPT_MESSAGE` for a batch whose size or CRC is wrong (`CorruptRecordException` from
//! `DefaultRecordBatch.ensureValid`), `INVALID_RECORD` for records that do not match their
//! counts (`InvalidRecordException` from `DefaultRecord.readFrom` and the batch iterator).

use super::bounds::{BoundsError, Cursor};

/// Bytes of a v2 batch header before the records (`RECORD_BATCH_OVERHEAD` in Kafka).
pub const BATCH_OVERHEAD: usize = 61;
/// Bytes before the batch length field counts: base offset and the length itself.
const LOG_OVERHEAD: usize = 12;
/// Where the CRC-covered part starts (the attributes).
const CRC_START: usize = 21;

/// Why a batch was refused, by the Kafka error it is answered with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchRefusal {
    /// `CORRUPT_MESSAGE`: the batch's size or CRC is wrong.
    Corrupt(String),
    /// `INVALID_RECORD`: the records do not match the counts the batch declares, or the
    /// batch is of a format not served.
    Invalid(String),
}

/// What the fixed header of a batch says, once checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchHeader {
    /// Bytes the whole batch spans, header included.
    pub size: usize,
    /// Records the batch declares.
    pub record_count: usize,
}

/// Checks the fixed header of the batch that starts `bytes`: its length within `bytes`,
/// magic 2 and the CRC-32C over attributes..end. Trailing bytes after the batch are the
/// caller's to judge.
pub fn check_header(bytes: &[u8]) -> Result<BatchHeader, BatchRefusal> {
    // The magic byte sits at the same place in v0/v1 message sets, which are shorter.
    if let Some(&magic) = bytes.get(16).filter(|&&magic| magic != 2) {
        return Err(BatchRefusal::Invalid(format!(
            "record batch magic {magic}: one v2 batch expected (message format v0/v1 is not \
             served)"
        )));
    }
    if bytes.len() < BATCH_OVERHEAD {
        return Err(BatchRefusal::Corrupt(format!(
            "record batch of {} bytes is smaller than the minimum allowed overhead {BATCH_OVERHEAD}",
            bytes.len()
        )));
    }
    let field =
        |at: usize| i32::from_be_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
    let length = field(8);
    let size = usize::try_from(length)
        .ok()
        .map(|l| l + LOG_OVERHEAD)
        .filter(|&size| (BATCH_OVERHEAD..=bytes.len()).contains(&size))
        .ok_or_else(|| {
            BatchRefusal::Corrupt(format!(
                "record batch length {length} is outside {}..={} (the bytes given)",
                BATCH_OVERHEAD - LOG_OVERHEAD,
                bytes.len() - LOG_OVERHEAD
            ))
        })?;
    let stored_crc = field(17) as u32;
    let computed_crc = crc32c::crc32c(&bytes[CRC_START..size]);
    if stored_crc != computed_crc {
        return Err(BatchRefusal::Corrupt(format!(
            "record batch is corrupt (stored crc = {stored_crc}, computed crc = {computed_crc})"
        )));
    }
    let count = field(57);
    let record_count = usize::try_from(count)
        .map_err(|_| BatchRefusal::Invalid(format!("invalid record count {count}")))?;
    Ok(BatchHeader { size, record_count })
}

/// Checks that the batch's offset range (base offset to base offset + last offset delta)
/// spans exactly its declared record count, as Kafka's `LogValidator.validateBatch` does for
/// every v2 batch a client produces, before any record is read: a range that is empty or
/// negative, a count that is not positive, or the two disagreeing is `INVALID_RECORD`. (A
/// batch whose records all carry offset delta 0 declares a range of one.)
pub fn check_offset_range(bytes: &[u8], header: &BatchHeader) -> Result<(), BatchRefusal> {
    assert!(bytes.len() >= BATCH_OVERHEAD, "checked by check_header");
    let base = i64::from_be_bytes(bytes[0..8].try_into().expect("8 bytes"));
    let last_delta = i32::from_be_bytes(bytes[23..27].try_into().expect("4 bytes"));
    let range = i64::from(last_delta) + 1;
    let last = base.wrapping_add(i64::from(last_delta));
    if range <= 0 {
        return Err(BatchRefusal::Invalid(format!(
            "Batch has an invalid offset range: [{base}, {last}]"
        )));
    }
    let count = header.record_count as i64;
    if count <= 0 {
        return Err(BatchRefusal::Invalid(format!(
            "Invalid reported count for record batch: {count}"
        )));
    }
    if range != count {
        return Err(BatchRefusal::Invalid(format!(
            "Inconsistent batch offset range [{base}, {last}] and count of records {count}"
        )));
    }
    Ok(())
}

/// Walks `records` (a batch's records, decompressed) and refuses them unless they are exactly
/// `record_count` records, each within its declared size and each header count within the
/// record's bytes.
pub fn check_records(records: &[u8], record_count: usize) -> Result<(), BatchRefusal> {
    // A record takes at least seven bytes; one byte each is the bound Kafka states.
    if record_count > records.len() {
        return Err(BatchRefusal::Invalid(format!(
            "record count {record_count} is larger than the {} bytes of records",
            records.len()
        )));
    }
    let mut cursor = Cursor::new(records);
    for index in 0..record_count {
        check_record(&mut cursor, index).map_err(|e| BatchRefusal::Invalid(e.0))?;
    }
    if cursor.remaining() > 0 {
        return Err(BatchRefusal::Invalid(format!(
            "incorrect declared batch size: {} bytes remain after {record_count} records",
            cursor.remaining()
        )));
    }
    Ok(())
}

/// One record: its size, then attributes, timestamp and offset deltas, key, value and headers,
/// which must fill the size exactly (`DefaultRecord.readFrom`).
fn check_record(cursor: &mut Cursor, index: usize) -> Result<(), BoundsError> {
    let what = format!("record {index}");
    let size = cursor.varint(&what)?;
    let size = usize::try_from(size)
        .map_err(|_| BoundsError(format!("{what}: negative record size {size}")))?;
    let mut body = Cursor::new(cursor.take(size, &what)?);
    body.skip(1, &what)?; // attributes
    body.skip_varlong(&what)?; // timestamp delta
    body.varint(&what)?; // offset delta
    skip_nullable(&mut body, &format!("{what} key"))?;
    skip_nullable(&mut body, &format!("{what} value"))?;
    let headers = body.varint(&what)?;
    let headers = usize::try_from(headers)
        .ok()
        .filter(|&n| n <= body.remaining())
        .ok_or_else(|| {
            BoundsError(format!(
                "{what}: invalid number of record headers {headers} ({} bytes remain)",
                body.remaining()
            ))
        })?;
    for header in 0..headers {
        let what = format!("{what} header {header}");
        let key = body.varint(&what)?;
        let key = usize::try_from(key)
            .map_err(|_| BoundsError(format!("{what}: negative key length {key}")))?;
        body.skip(key, &what)?;
        skip_nullable(&mut body, &what)?;
    }
    if body.remaining() > 0 {
        return Err(BoundsError(format!(
            "{what}: invalid record size: {} of its {size} bytes left unread",
            body.remaining()
        )));
    }
    Ok(())
}

/// A varint length (-1 for null) and that many bytes.
fn skip_nullable(cursor: &mut Cursor, what: &str) -> Result<(), BoundsError> {
    match cursor.varint(what)? {
        -1 => Ok(()),
        n if n >= 0 => cursor.skip(n as usize, what),
        n => Err(BoundsError(format!("{what}: negative length {n}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::indexmap::IndexMap;
    use kafka_protocol::protocol::StrBytes;
    use kafka_protocol::records::{
        Compression, Record, RecordBatchEncoder, RecordEncodeOptions, TimestampType,
    };

    fn record(offset: i64, headers: usize) -> Record {
        let mut map = IndexMap::new();
        for h in 0..headers {
            map.insert(StrBytes::from_string(format!("h{h}")), Some("v".into()));
        }
        Record {
            transactional: false,
            control: false,
            partition_leader_epoch: 0,
            producer_id: -1,
            producer_epoch: -1,
            timestamp_type: TimestampType::Creation,
            offset,
            // Offset minus sequence constant, so the encoder keeps the records in one batch.
            sequence: offset as i32 - 1,
            timestamp: 1_000,
            key: Some("k".into()),
            value: Some("value".into()),
            headers: map,
            delete_horizon: false,
        }
    }

    fn batch(records: &[Record]) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let options = RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        };
        RecordBatchEncoder::encode(&mut buf, records, &options).unwrap();
        buf.to_vec()
    }

    /// Sets bytes `at..at + 4` and fixes the CRC, as an attacker would.
    fn patch(mut bytes: Vec<u8>, at: usize, value: &[u8]) -> Vec<u8> {
        bytes[at..at + value.len()].copy_from_slice(value);
        let crc = crc32c::crc32c(&bytes[CRC_START..]);
        bytes[17..21].copy_from_slice(&crc.to_be_bytes());
        bytes
    }

    #[test]
    fn crate_encoded_batches_pass() {
        for (count, headers) in [(1, 0), (3, 0), (2, 3)] {
            let records: Vec<Record> = (0..count).map(|o| record(o, headers)).collect();
            let bytes = batch(&records);
            let header = check_header(&bytes).unwrap();
            assert_eq!(header.size, bytes.len());
            assert_eq!(header.record_count, count as usize);
            assert_eq!(
                check_records(&bytes[BATCH_OVERHEAD..], header.record_count),
                Ok(())
            );
        }
    }

    #[test]
    fn a_record_count_of_0x7fffffff_is_refused_as_invalid_record() {
        let bytes = patch(batch(&[record(0, 0)]), 57, &[0x7f, 0xff, 0xff, 0xff]);
        let header = check_header(&bytes).unwrap();
        assert_eq!(header.record_count, 0x7fff_ffff);
        let refusal = check_records(&bytes[BATCH_OVERHEAD..], header.record_count).unwrap_err();
        assert!(
            matches!(&refusal, BatchRefusal::Invalid(m) if m.starts_with("record count 2147483647 is larger")),
            "{refusal:?}"
        );
    }

    #[test]
    fn a_record_count_above_the_records_present_is_refused() {
        let bytes = patch(batch(&[record(0, 0)]), 57, &[0, 0, 0, 2]);
        let refusal = check_records(&bytes[BATCH_OVERHEAD..], 2).unwrap_err();
        assert!(matches!(refusal, BatchRefusal::Invalid(m) if m.starts_with("record 1")));
        let bytes = patch(batch(&[record(0, 0), record(1, 0)]), 57, &[0, 0, 0, 1]);
        let refusal = check_records(&bytes[BATCH_OVERHEAD..], 1).unwrap_err();
        assert!(matches!(refusal, BatchRefusal::Invalid(m) if m.contains("declared batch size")));
    }

    #[test]
    fn a_header_count_of_2_pow_30_is_refused() {
        let bytes = batch(&[record(0, 0)]);
        // The record's last byte is its header count, zigzag varint 0; 2^30 is 0x80 80 80 80 08.
        let mut records = bytes[BATCH_OVERHEAD..].to_vec();
        assert_eq!(records.pop(), Some(0));
        records.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x08]);
        records[0] += 8; // the record size varint (zigzag, one byte): 4 more bytes
        let refusal = check_records(&records, 1).unwrap_err();
        assert_eq!(
            refusal,
            BatchRefusal::Invalid(
                "record 0: invalid number of record headers 1073741824 (0 bytes remain)".into()
            )
        );
    }

    #[test]
    fn the_offset_range_must_span_the_record_count_as_kafka_checks_it() {
        for count in [1, 3] {
            let bytes = batch(&(0..count).map(|o| record(o, 0)).collect::<Vec<_>>());
            let header = check_header(&bytes).unwrap();
            assert_eq!(check_offset_range(&bytes, &header), Ok(()));
        }
        // Three records whose offset deltas are all 0 declare a range of one offset.
        let bytes = patch(
            batch(&[record(0, 0), record(1, 0), record(2, 0)]),
            23,
            &[0, 0, 0, 0],
        );
        let header = check_header(&bytes).unwrap();
        assert_eq!(
            check_offset_range(&bytes, &header),
            Err(BatchRefusal::Invalid(
                "Inconsistent batch offset range [0, 0] and count of records 3".into()
            ))
        );
        let bytes = patch(batch(&[record(0, 0)]), 23, &[0xff, 0xff, 0xff, 0xff]);
        let header = check_header(&bytes).unwrap();
        assert!(matches!(
            check_offset_range(&bytes, &header),
            Err(BatchRefusal::Invalid(m)) if m.starts_with("Batch has an invalid offset range")
        ));
        let bytes = patch(batch(&[record(0, 0)]), 57, &[0, 0, 0, 0]);
        let header = check_header(&bytes).unwrap();
        assert!(matches!(
            check_offset_range(&bytes, &header),
            Err(BatchRefusal::Invalid(m)) if m.starts_with("Invalid reported count")
        ));
    }

    #[test]
    fn corrupt_sizes_and_crcs_are_corrupt_message() {
        let bytes = batch(&[record(0, 0)]);
        assert!(matches!(
            check_header(&bytes[..60]),
            Err(BatchRefusal::Corrupt(_))
        ));
        assert!(matches!(
            check_header(&bytes[..bytes.len() - 1]),
            Err(BatchRefusal::Corrupt(_))
        ));
        let mut flipped = bytes.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(
            matches!(check_header(&flipped), Err(BatchRefusal::Corrupt(m)) if m.contains("crc"))
        );
        let mut v1 = bytes;
        v1[16] = 1;
        assert!(matches!(check_header(&v1), Err(BatchRefusal::Invalid(_))));
    }
}
