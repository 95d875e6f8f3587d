//! A Kafka client of the raw protocol for the wire tests (`kafka_wire.rs`,
//! `kafka_idempotence.rs`): one request frame out, one answer in, encoded and decoded with the
//! `kafka-protocol` crate's client-side codecs.

#![allow(dead_code)] // each test file uses a different part of this module

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use kafka_protocol::records::{Compression, Record, RecordBatchEncoder, RecordEncodeOptions};

/// A connection to `address` whose reads give up after 10 s.
pub fn connect(address: &str) -> TcpStream {
    let stream = TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// Sends one request frame.
pub fn send<T: Encodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    correlation: i32,
    body: &T,
) {
    let mut buf = BytesMut::new();
    RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation)
        .with_client_id(Some(StrBytes::from_static_str("wire-test")))
        .encode(&mut buf, key.request_header_version(version))
        .unwrap();
    body.encode(&mut buf, version).unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(buf.len() as i32);
    frame.put_slice(&buf);
    stream.write_all(&frame).unwrap();
}

/// Reads one answer: its correlation id and body (after a header of `header_version`).
pub fn receive(stream: &mut TcpStream, header_version: i16) -> Option<(i32, Bytes)> {
    let mut size = [0u8; 4];
    stream.read_exact(&mut size).ok()?;
    let mut body = vec![0u8; i32::from_be_bytes(size) as usize];
    stream.read_exact(&mut body).unwrap();
    let mut body = Bytes::from(body);
    let correlation = body.get_i32();
    if header_version >= 1 {
        assert_eq!(body.get_u8(), 0, "no tagged fields");
    }
    Some((correlation, body))
}

pub fn call<Req: Encodable, Resp: Decodable + HeaderVersion>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Resp {
    send(stream, key, version, 7, body);
    let (correlation, mut answer) =
        receive(stream, Resp::header_version(version)).expect("an answer");
    assert_eq!(correlation, 7);
    Resp::decode(&mut answer, version).unwrap()
}

/// `records` as one v2 batch, uncompressed.
pub fn batch(records: &[Record]) -> Bytes {
    let mut buf = BytesMut::new();
    RecordBatchEncoder::encode(
        &mut buf,
        records,
        &RecordEncodeOptions {
            version: 2,
            compression: Compression::None,
        },
    )
    .unwrap();
    buf.freeze()
}
