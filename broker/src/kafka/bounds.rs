//! The validating pass over a request body before the `kafka-protocol` crate decodes it.
//!
//! The crate's decoders size their vectors from counts read off the wire
//! (`Vec::with_capacity(n)` for every array), and a failed allocation aborts the process: a
//! 24-byte Metadata request with an array count of 0x7FFFFFFF took the whole broker down
//! (issue 22). This pass walks the body along its [`schema`](super::schema) description and
//! refuses it when any array, string or bytes length is longer than the bytes that remain
//! (every element costs at least one byte), so by the time the crate allocates, each count
//! it reads is bounded by the frame it came in. Kafka closes the connection on a request it
//! cannot parse (`SocketServer` on an `InvalidRequestException` from `parseRequest`), and so
//! does the caller on a refusal here.
//!
//! The walk reads exactly what the crate's decoder reads, in the same order, including the
//! known tagged fields, so both see the same counts; a known tagged field whose value is not
//! exactly its declared size is refused, since the crate would read past it.

use super::schema::{Field, RequestSchema, Struct, Tagged, Ty};

/// Why a body was refused, with the field that broke the bound.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BoundsError(pub String);

/// A read position in a byte slice, with the protocol's primitive readers.
pub struct Cursor<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor at the start of `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, position: 0 }
    }

    /// Bytes read so far.
    pub fn position(&self) -> usize {
        self.position
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// The next `n` bytes, or an error naming `what` when fewer remain.
    pub fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], BoundsError> {
        if n > self.remaining() {
            return Err(BoundsError(format!(
                "{what}: {n} bytes wanted, {} remain",
                self.remaining()
            )));
        }
        let taken = &self.bytes[self.position..self.position + n];
        self.position += n;
        Ok(taken)
    }

    /// A big-endian INT16.
    pub fn i16(&mut self, what: &str) -> Result<i16, BoundsError> {
        let b = self.take(2, what)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian INT32.
    pub fn i32(&mut self, what: &str) -> Result<i32, BoundsError> {
        let b = self.take(4, what)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An UNSIGNED_VARINT, read as the crate reads it: at most five bytes, bits past 32
    /// dropped.
    pub fn uvarint(&mut self, what: &str) -> Result<u32, BoundsError> {
        let mut value = 0u32;
        for i in 0..5 {
            let b = self.take(1, what)?[0] as u32;
            value |= (b & 0x7F) << (i * 7);
            if b < 0x80 {
                break;
            }
        }
        Ok(value)
    }

    /// A VARINT (zigzag).
    pub fn varint(&mut self, what: &str) -> Result<i32, BoundsError> {
        let zigzag = self.uvarint(what)?;
        Ok(((zigzag >> 1) as i32) ^ (-((zigzag & 1) as i32)))
    }

    /// A VARLONG (zigzag, at most ten bytes), skipped: nothing is sized by one.
    pub fn skip_varlong(&mut self, what: &str) -> Result<(), BoundsError> {
        for _ in 0..10 {
            if self.take(1, what)?[0] < 0x80 {
                break;
            }
        }
        Ok(())
    }

    /// Skips `n` bytes of `what`, refusing a length longer than what remains.
    pub fn skip(&mut self, n: usize, what: &str) -> Result<(), BoundsError> {
        self.take(n, what).map(|_| ())
    }
}

/// Walks `body` (the bytes after the request header) as `schema` at `version` and returns the
/// bytes it spans; refuses the body when a length read off the wire exceeds what remains.
/// Trailing bytes are left to the caller: the crate ignores them, and so does Kafka.
pub fn check_request(
    schema: &RequestSchema,
    version: i16,
    body: &[u8],
) -> Result<usize, BoundsError> {
    let mut cursor = Cursor::new(body);
    let walk = Walk {
        version,
        flexible: version >= schema.flexible_from,
    };
    walk.structure(&mut cursor, &schema.body, "body")?;
    Ok(cursor.position())
}

/// The version being walked and whether it is flexible.
struct Walk {
    version: i16,
    flexible: bool,
}

impl Walk {
    fn structure(&self, c: &mut Cursor, s: &Struct, path: &str) -> Result<(), BoundsError> {
        for field in s.fields.iter().filter(|f| f.at(self.version)) {
            self.value(c, field.ty, &format!("{path}.{}", field.name))?;
        }
        if self.flexible {
            self.tagged_fields(c, s.tagged, path)?;
        }
        Ok(())
    }

    fn value(&self, c: &mut Cursor, ty: Ty, path: &str) -> Result<(), BoundsError> {
        match ty {
            Ty::Bool | Ty::I8 => c.skip(1, path),
            Ty::I16 => c.skip(2, path),
            Ty::I32 => c.skip(4, path),
            Ty::I64 => c.skip(8, path),
            Ty::Uuid => c.skip(16, path),
            Ty::Str => {
                let length = self.string_length(c, path)?;
                c.skip(length, path)
            }
            Ty::Bytes | Ty::Records => {
                let length = self.bytes_length(c, path)?;
                c.skip(length, path)
            }
            Ty::List(element) => {
                for _ in 0..self.array_count(c, path)? {
                    self.value(c, *element, path)?;
                }
                Ok(())
            }
            Ty::Structs(element) => {
                for _ in 0..self.array_count(c, path)? {
                    self.structure(c, element, path)?;
                }
                Ok(())
            }
        }
    }

    /// A compact length: `n + 1`, 0 for null. `None` for null.
    fn compact_length(c: &mut Cursor, path: &str) -> Result<Option<usize>, BoundsError> {
        Ok(match c.uvarint(path)? {
            0 => None,
            n => Some((n - 1) as usize),
        })
    }

    /// A classic length, -1 for null; anything below is refused, as the crate refuses it.
    fn classic_length(length: i64, path: &str) -> Result<Option<usize>, BoundsError> {
        match length {
            -1 => Ok(None),
            n if n >= 0 => Ok(Some(n as usize)),
            n => Err(BoundsError(format!("{path}: negative length {n}"))),
        }
    }

    /// A string's length in bytes (0 for null), not yet checked against what remains.
    fn string_length(&self, c: &mut Cursor, path: &str) -> Result<usize, BoundsError> {
        let length = if self.flexible {
            Self::compact_length(c, path)?
        } else {
            Self::classic_length(c.i16(path)?.into(), path)?
        };
        Ok(length.unwrap_or(0))
    }

    /// A bytes field's length (0 for null), not yet checked against what remains.
    fn bytes_length(&self, c: &mut Cursor, path: &str) -> Result<usize, BoundsError> {
        let length = if self.flexible {
            Self::compact_length(c, path)?
        } else {
            Self::classic_length(c.i32(path)?.into(), path)?
        };
        Ok(length.unwrap_or(0))
    }

    /// An array's element count (0 for null), refused when it exceeds the bytes that remain:
    /// every element of every array served takes at least one byte.
    fn array_count(&self, c: &mut Cursor, path: &str) -> Result<usize, BoundsError> {
        let count = if self.flexible {
            Self::compact_length(c, path)?
        } else {
            Self::classic_length(c.i32(path)?.into(), path)?
        }
        .unwrap_or(0);
        if count > c.remaining() {
            return Err(BoundsError(format!(
                "{path}: an array of {count} elements in {} remaining bytes",
                c.remaining()
            )));
        }
        Ok(count)
    }

    /// The tagged fields that end a struct in flexible versions (KIP-482): a count, then for
    /// each a tag, a size and that many bytes.
    fn tagged_fields(
        &self,
        c: &mut Cursor,
        known: &[Tagged],
        path: &str,
    ) -> Result<(), BoundsError> {
        let what = format!("{path} tagged fields");
        let count = c.uvarint(&what)? as usize;
        // A tag and a size take at least a byte each.
        if count > c.remaining() / 2 {
            return Err(BoundsError(format!(
                "{what}: {count} fields in {} remaining bytes",
                c.remaining()
            )));
        }
        for _ in 0..count {
            let tag = c.uvarint(&what)?;
            let size = c.uvarint(&what)? as usize;
            if size > c.remaining() {
                return Err(BoundsError(format!(
                    "{what}: tag {tag} of {size} bytes in {} remaining bytes",
                    c.remaining()
                )));
            }
            match known
                .iter()
                .find(|t| t.tag == tag && t.field.at(self.version))
            {
                Some(tagged) => self.known_tagged(c, &tagged.field, size, path)?,
                None => c.skip(size, &what)?,
            }
        }
        Ok(())
    }

    /// A known tagged field: the crate decodes its value in place, so it must span exactly
    /// its declared size for the crate to stay where this walk is.
    fn known_tagged(
        &self,
        c: &mut Cursor,
        field: &Field,
        size: usize,
        path: &str,
    ) -> Result<(), BoundsError> {
        let start = c.position();
        let what = format!("{path}.{}", field.name);
        self.value(c, field.ty, &what)?;
        let spanned = c.position() - start;
        if spanned != size {
            return Err(BoundsError(format!(
                "{what}: tagged field of {size} bytes holds a value of {spanned}"
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kafka::schema::request_schema;
    use crate::kafka::versions::SERVED;
    use bytes::BytesMut;
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Encodable;

    fn schema(key: ApiKey) -> &'static RequestSchema {
        request_schema(key).unwrap()
    }

    /// Issue 22's Metadata v1 frame `00000014 0003 0001 00000001 0006 "attack" 7fffffff`:
    /// after the header (client id "attack") the body is a topic-array count of 0x7FFFFFFF.
    #[test]
    fn issue_22_metadata_topic_count_is_refused() {
        let error =
            check_request(schema(ApiKey::Metadata), 1, &[0x7f, 0xff, 0xff, 0xff]).unwrap_err();
        assert_eq!(
            error.0,
            "body.Topics: an array of 2147483647 elements in 0 remaining bytes"
        );
        // One topic named "attack" is a valid v1 body.
        let body = [0, 0, 0, 1, 0, 6, b'a', b't', b't', b'a', b'c', b'k'];
        assert_eq!(check_request(schema(ApiKey::Metadata), 1, &body), Ok(12));
    }

    #[test]
    fn a_compact_array_count_past_the_frame_is_refused() {
        // Metadata v12: a compact array count of 2^32 - 1 (u32::MAX) is 2^32 - 2 elements.
        let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0x00];
        let error = check_request(schema(ApiKey::Metadata), 12, &body).unwrap_err();
        assert!(error.0.contains("4294967294 elements"), "{error}");
    }

    #[test]
    fn lengths_past_the_frame_are_refused_in_every_kind_of_field() {
        // Heartbeat v0: group id of 0x7fff bytes in a 10-byte body.
        let body = [0x7f, 0xff, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(check_request(schema(ApiKey::Heartbeat), 0, &body).is_err());
        // JoinGroup v0: group "g", timeout, member "", protocol type "consumer", one
        // protocol "r" with 0x7fffffff bytes of metadata.
        let mut body = vec![0, 1, b'g', 0, 0, 0, 1, 0, 0, 0, 8];
        body.extend_from_slice(b"consumer");
        body.extend_from_slice(&[0, 0, 0, 1, 0, 1, b'r', 0x7f, 0xff, 0xff, 0xff]);
        let error = check_request(schema(ApiKey::JoinGroup), 0, &body).unwrap_err();
        assert_eq!(
            error.0,
            "body.Protocols.Metadata: 2147483647 bytes wanted, 0 remain"
        );
        // A tagged-field count past the frame (ApiVersions v3: two empty strings, then a
        // count of 2^28).
        let body = [1, 1, 0x80, 0x80, 0x80, 0x80, 0x01];
        assert!(check_request(schema(ApiKey::ApiVersions), 3, &body).is_err());
    }

    #[test]
    fn a_known_tagged_field_must_span_its_size() {
        // Fetch v12 ends with tagged fields; ClusterId (tag 0) declared as 5 bytes but
        // holding a 2-byte compact string.
        let mut buf = BytesMut::new();
        FetchRequest::default().encode(&mut buf, 12).unwrap();
        let mut body = buf.to_vec();
        assert_eq!(body.pop(), Some(0), "no tagged fields");
        body.extend_from_slice(&[1, 0, 5, 2, b'c', 0, 0, 0]);
        let error = check_request(schema(ApiKey::Fetch), 12, &body).unwrap_err();
        assert!(error.0.contains("ClusterId"), "{error}");
    }

    /// The crate's own encoder is the oracle: a default request of every served API and
    /// version, and one with arrays filled, are walked to their last byte.
    #[test]
    fn crate_encoded_defaults_walk_to_their_end() {
        for &(key, min, max) in SERVED {
            for version in min..=max {
                let body = encode_default(key, version);
                assert_eq!(
                    check_request(schema(key), version, &body),
                    Ok(body.len()),
                    "{key:?} v{version}"
                );
            }
        }
    }

    fn encode_default(key: ApiKey, version: i16) -> Vec<u8> {
        let mut buf = BytesMut::new();
        let result = match key {
            ApiKey::Produce => ProduceRequest::default().encode(&mut buf, version),
            ApiKey::Fetch => FetchRequest::default().encode(&mut buf, version),
            ApiKey::ListOffsets => ListOffsetsRequest::default().encode(&mut buf, version),
            ApiKey::Metadata => MetadataRequest::default().encode(&mut buf, version),
            ApiKey::OffsetCommit => OffsetCommitRequest::default().encode(&mut buf, version),
            ApiKey::OffsetFetch => OffsetFetchRequest::default().encode(&mut buf, version),
            ApiKey::FindCoordinator => FindCoordinatorRequest::default().encode(&mut buf, version),
            ApiKey::JoinGroup => JoinGroupRequest::default().encode(&mut buf, version),
            ApiKey::Heartbeat => HeartbeatRequest::default().encode(&mut buf, version),
            ApiKey::LeaveGroup => LeaveGroupRequest::default().encode(&mut buf, version),
            ApiKey::SyncGroup => SyncGroupRequest::default().encode(&mut buf, version),
            ApiKey::ApiVersions => ApiVersionsRequest::default().encode(&mut buf, version),
            ApiKey::CreateTopics => CreateTopicsRequest::default().encode(&mut buf, version),
            ApiKey::DeleteTopics => DeleteTopicsRequest::default().encode(&mut buf, version),
            ApiKey::DeleteRecords => DeleteRecordsRequest::default().encode(&mut buf, version),
            ApiKey::InitProducerId => InitProducerIdRequest::default().encode(&mut buf, version),
            ApiKey::OffsetForLeaderEpoch => {
                OffsetForLeaderEpochRequest::default().encode(&mut buf, version)
            }
            ApiKey::AddPartitionsToTxn => {
                kafka_protocol::messages::AddPartitionsToTxnRequest::default()
                    .encode(&mut buf, version)
            }
            ApiKey::EndTxn => {
                kafka_protocol::messages::EndTxnRequest::default().encode(&mut buf, version)
            }
            ApiKey::AddOffsetsToTxn => kafka_protocol::messages::AddOffsetsToTxnRequest::default()
                .encode(&mut buf, version),
            ApiKey::TxnOffsetCommit => kafka_protocol::messages::TxnOffsetCommitRequest::default()
                .encode(&mut buf, version),
            ApiKey::WriteTxnMarkers => kafka_protocol::messages::WriteTxnMarkersRequest::default()
                .encode(&mut buf, version),
            other => panic!("{other:?} is not served"),
        };
        result.unwrap_or_else(|e| panic!("{key:?} v{version}: {e}"));
        buf.to_vec()
    }
}
