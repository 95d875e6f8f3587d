//! One segment of a partition log: a `.log` file of record batches and its sparse `.index`.
//!
//! Index entries are 16 bytes, big-endian: `relative_offset u32` (base offset of a batch minus
//! the segment's base offset), `position u32` (where that batch starts in the `.log` file), and
//! `max_timestamp_before_ms i64` (the largest record timestamp of all batches before that
//! position, `i64::MIN` if none). An entry is added when at least `index.interval.bytes` were
//! appended since the previous one. When a segment is rolled, a final entry pointing at the end
//! of the file seals it, so the segment's largest timestamp is known on open without a scan.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use super::batch::{self, BatchError, BatchHeader, HEADER_LEN};
use super::{Batch, LogError};

/// Bytes per index entry.
const INDEX_ENTRY_LEN: usize = 16;
/// Smallest read issued while scanning a segment, to avoid one syscall per small batch.
const SCAN_CHUNK_MIN: usize = 4 * 1024;
/// Largest read issued while scanning (a single batch larger than this is still read whole).
const SCAN_CHUNK_MAX: usize = 1024 * 1024;

/// The file name of a segment's log: the base offset as 20 digits, like Kafka's.
pub fn log_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.log")
}

/// The file name of a segment's offset index.
pub fn index_file_name(base_offset: u64) -> String {
    format!("{base_offset:020}.index")
}

/// One sparse index entry (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IndexEntry {
    /// Base offset of the indexed batch minus the segment's base offset.
    pub relative_offset: u32,
    /// Byte position of that batch in the `.log` file.
    pub position: u32,
    /// Largest record timestamp of the batches before `position`.
    pub max_timestamp_before_ms: i64,
}

impl IndexEntry {
    fn to_bytes(self) -> [u8; INDEX_ENTRY_LEN] {
        let mut bytes = [0u8; INDEX_ENTRY_LEN];
        bytes[0..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        bytes[4..8].copy_from_slice(&self.position.to_be_bytes());
        bytes[8..16].copy_from_slice(&self.max_timestamp_before_ms.to_be_bytes());
        bytes
    }

    fn from_bytes(bytes: &[u8]) -> IndexEntry {
        IndexEntry {
            relative_offset: u32::from_be_bytes(bytes[0..4].try_into().expect("4 bytes")),
            position: u32::from_be_bytes(bytes[4..8].try_into().expect("4 bytes")),
            max_timestamp_before_ms: i64::from_be_bytes(bytes[8..16].try_into().expect("8 bytes")),
        }
    }
}

/// What verifying a segment found.
#[derive(Debug, PartialEq, Eq)]
pub struct Verified {
    /// Offset of the first batch that was verified (earlier ones were below the recovery point).
    pub verified_from: u64,
    /// Offset one past the last valid record.
    pub next_offset: u64,
    /// Set when the segment had to be cut: where and why.
    pub truncated: Option<(u64, String)>,
    /// (leader epoch, base offset) of each batch whose epoch differs from the one before it.
    pub epoch_starts: Vec<(u32, u64)>,
}

/// A segment file pair and what the log keeps in memory about it.
#[derive(Debug)]
pub struct Segment {
    /// Offset of the first record the segment may hold (its file name).
    pub base_offset: u64,
    /// The `.log` file, opened for reading and writing.
    log: File,
    /// The `.index` file, opened for reading and writing.
    index_file: File,
    log_path: PathBuf,
    index_path: PathBuf,
    /// The sparse index, mirrored in memory so lookups need no I/O.
    index: Vec<IndexEntry>,
    /// Bytes of valid batches in the `.log` file; the next batch is written here.
    size_bytes: u64,
    /// Largest record timestamp in the segment (`i64::MIN` while empty); drives time retention.
    max_timestamp_ms: i64,
    /// Bytes appended since the last index entry.
    bytes_since_index_entry: u64,
}

impl Segment {
    /// Creates a new, empty segment (fails if its files exist).
    pub fn create(dir: &Path, base_offset: u64) -> Result<Segment, LogError> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let open_new = |path: &Path| {
            OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(true)
                .open(path)
        };
        let log = open_new(&log_path)?;
        let index_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&index_path)?;
        Ok(Segment {
            base_offset,
            log,
            index_file,
            log_path,
            index_path,
            index: Vec::new(),
            size_bytes: 0,
            max_timestamp_ms: i64::MIN,
            bytes_since_index_entry: 0,
        })
    }

    /// Opens an existing segment without reading its batches: the index file is trusted if it
    /// is well-formed (otherwise rebuilt from the batch headers), and only the bytes after the
    /// last index entry are scanned to learn the largest timestamp. For segments below the
    /// recovery point, which were fsynced before it was advanced.
    pub fn open_trusted(
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Segment, LogError> {
        let mut segment = Segment::open_files(dir, base_offset)?;
        segment.size_bytes = segment.log.metadata()?.len();
        // A sealed segment's index ends with an entry at the end of the file (empty if the
        // segment is); anything else means the index was lost or damaged.
        let size_bytes = segment.size_bytes;
        let sealed = |index: &Vec<IndexEntry>| {
            index
                .last()
                .map_or(size_bytes == 0, |e| u64::from(e.position) == size_bytes)
        };
        match segment.load_index()? {
            Some(index) if sealed(&index) => {
                segment.max_timestamp_ms =
                    index.last().map_or(i64::MIN, |e| e.max_timestamp_before_ms);
                segment.index = index;
            }
            _ => {
                tracing::warn!(segment = %segment.log_path.display(), "rebuilding offset index");
                segment.rebuild_index_from_headers(index_interval_bytes)?;
            }
        }
        Ok(segment)
    }

    /// Opens an existing segment and verifies every batch (header, CRC, offsets following on
    /// from `base_offset`) from the recovery point on: batches before the last index entry at or
    /// below `recovery_point` were fsynced and are trusted. Everything from the first bad batch
    /// on is cut off the file. The index is rebuilt from the valid batches.
    pub fn open_verified(
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
        recovery_point: u64,
    ) -> Result<(Segment, Verified), LogError> {
        let mut segment = Segment::open_files(dir, base_offset)?;
        let file_len = segment.log.metadata()?.len();
        let mut position = 0u64;
        let mut next_offset = base_offset;
        let mut index = Vec::new();
        let mut max_timestamp_ms = i64::MIN;
        let mut bytes_since_index_entry = 0u64;
        if recovery_point > base_offset {
            segment.size_bytes = file_len; // what load_index checks positions against
            if let Some(entries) = segment.load_index()? {
                let trusted = entries.partition_point(|e| {
                    base_offset + u64::from(e.relative_offset) <= recovery_point
                });
                if let Some(resume) = trusted.checked_sub(1).map(|i| entries[i]) {
                    index.extend_from_slice(&entries[..trusted - 1]);
                    position = u64::from(resume.position);
                    next_offset = base_offset + u64::from(resume.relative_offset);
                    max_timestamp_ms = resume.max_timestamp_before_ms;
                    // Makes the loop below add the resume entry back for its batch.
                    bytes_since_index_entry = index_interval_bytes;
                }
            }
        }
        let verified_from = next_offset;
        let mut truncated = None;
        let mut epoch_starts: Vec<(u32, u64)> = Vec::new();
        let mut scanner = Scanner::new(&segment.log, file_len, SCAN_CHUNK_MAX);
        while position < file_len {
            let checked = scanner
                .batch_at(position)
                .and_then(|bytes| batch::verify(bytes).map_err(ScanError::Batch));
            let header = match checked {
                Ok(header) if header.base_offset == next_offset => header,
                Ok(header) => {
                    let why = format!(
                        "batch at position {position} has base offset {}, expected {next_offset}",
                        header.base_offset
                    );
                    truncated = Some((position, why));
                    break;
                }
                Err(ScanError::Io(e)) => return Err(LogError::Io(e)),
                Err(ScanError::Batch(e)) => {
                    truncated = Some((position, format!("batch at position {position}: {e:?}")));
                    break;
                }
            };
            if u32::try_from(position).is_err()
                || u32::try_from(header.base_offset - base_offset).is_err()
            {
                truncated = Some((
                    position,
                    "segment exceeds the index's 32-bit range".to_string(),
                ));
                break;
            }
            if position > 0 && bytes_since_index_entry >= index_interval_bytes {
                index.push(IndexEntry {
                    relative_offset: (header.base_offset - base_offset) as u32,
                    position: position as u32,
                    max_timestamp_before_ms: max_timestamp_ms,
                });
                bytes_since_index_entry = 0;
            }
            if epoch_starts.last().map(|&(e, _)| e) != Some(header.leader_epoch) {
                epoch_starts.push((header.leader_epoch, header.base_offset));
            }
            bytes_since_index_entry += header.total_len as u64;
            max_timestamp_ms = max_timestamp_ms.max(header.max_timestamp_ms);
            next_offset = header.next_offset();
            position += header.total_len as u64;
        }
        drop(scanner);
        if truncated.is_some() {
            segment.log.set_len(position)?;
        }
        segment.size_bytes = position;
        segment.index = index;
        segment.max_timestamp_ms = max_timestamp_ms;
        segment.bytes_since_index_entry = bytes_since_index_entry;
        segment.write_whole_index()?;
        let verified = Verified {
            verified_from,
            next_offset,
            truncated,
            epoch_starts,
        };
        Ok((segment, verified))
    }

    fn open_files(dir: &Path, base_offset: u64) -> Result<Segment, LogError> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let log = OpenOptions::new().read(true).write(true).open(&log_path)?;
        let index_file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&index_path)?;
        Ok(Segment {
            base_offset,
            log,
            index_file,
            log_path,
            index_path,
            index: Vec::new(),
            size_bytes: 0,
            max_timestamp_ms: i64::MIN,
            bytes_since_index_entry: 0,
        })
    }

    /// Bytes of batches in the segment.
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes
    }

    /// Largest record timestamp, `None` while empty.
    pub fn max_timestamp_ms(&self) -> Option<i64> {
        (self.size_bytes > 0).then_some(self.max_timestamp_ms)
    }

    /// Number of index entries (for tests and diagnostics).
    pub fn index_len(&self) -> usize {
        self.index.len()
    }

    /// Appends an encoded batch with write(2): when this returns the bytes are in the page
    /// cache, so a killed process loses nothing. A failed or short write is cut off again.
    pub fn append(
        &mut self,
        header: &BatchHeader,
        bytes: &[u8],
        index_interval_bytes: u64,
    ) -> Result<(), LogError> {
        let position = self.size_bytes;
        let relative_offset = header.base_offset - self.base_offset;
        assert!(
            position + bytes.len() as u64 <= u64::from(u32::MAX),
            "segment beyond 4 GiB"
        );
        assert!(
            relative_offset <= u64::from(u32::MAX),
            "relative offset beyond u32"
        );
        if let Err(e) = self.log.write_all_at(bytes, position) {
            // Best effort: leave no partial batch for the next append to follow.
            let _ = self.log.set_len(position);
            return Err(LogError::Io(e));
        }
        if position > 0 && self.bytes_since_index_entry >= index_interval_bytes {
            let entry = IndexEntry {
                relative_offset: relative_offset as u32,
                position: position as u32,
                max_timestamp_before_ms: self.max_timestamp_ms,
            };
            if let Err(e) = self.push_index_entry(entry) {
                // Undo the batch too, so the log and its index stay in step.
                let _ = self.log.set_len(position);
                return Err(e);
            }
            self.bytes_since_index_entry = 0;
        }
        self.size_bytes += bytes.len() as u64;
        self.bytes_since_index_entry += bytes.len() as u64;
        self.max_timestamp_ms = self.max_timestamp_ms.max(header.max_timestamp_ms);
        Ok(())
    }

    fn push_index_entry(&mut self, entry: IndexEntry) -> Result<(), LogError> {
        let at = (self.index.len() * INDEX_ENTRY_LEN) as u64;
        self.index_file.write_all_at(&entry.to_bytes(), at)?;
        self.index.push(entry);
        Ok(())
    }

    /// Seals a segment that will get no more appends: a final index entry at the end of the
    /// file (records the largest timestamp), then fsync of both files.
    pub fn seal(&mut self, next_offset: u64) -> Result<(), LogError> {
        if self.size_bytes > 0 {
            self.push_index_entry(IndexEntry {
                relative_offset: u32::try_from(next_offset - self.base_offset).unwrap_or(u32::MAX),
                position: self.size_bytes as u32,
                max_timestamp_before_ms: self.max_timestamp_ms,
            })?;
        }
        self.sync()
    }

    /// Fsyncs the log and index files.
    pub fn sync(&self) -> Result<(), LogError> {
        self.log.sync_data()?;
        self.index_file.sync_data()?;
        Ok(())
    }

    /// Deletes both files of the segment.
    pub fn delete(self) -> Result<(), LogError> {
        fs::remove_file(&self.log_path)?;
        match fs::remove_file(&self.index_path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(LogError::Io(e)),
            _ => Ok(()),
        }
    }

    /// Position of the batch from which a scan for `offset` must start: the largest indexed
    /// batch whose base offset is <= `offset`.
    fn lookup(&self, offset: u64) -> u64 {
        let relative = offset
            .saturating_sub(self.base_offset)
            .min(u64::from(u32::MAX)) as u32;
        let idx = self
            .index
            .partition_point(|e| e.relative_offset <= relative);
        idx.checked_sub(1)
            .map_or(0, |i| u64::from(self.index[i].position))
    }

    /// Decoded batches holding records in [`offset`, `end_offset`), in order, until `visit`
    /// returns false. Batches wholly below `offset` are skipped by their header (no CRC check);
    /// every batch handed to `visit` was CRC-checked.
    pub fn scan_from(
        &self,
        offset: u64,
        end_offset: u64,
        chunk_hint: usize,
        mut visit: impl FnMut(Batch) -> bool,
    ) -> Result<(), LogError> {
        self.scan_raw(offset, end_offset, chunk_hint, |bytes| {
            let (batch, _) = batch::decode(bytes)?;
            Ok(visit(batch))
        })
    }

    /// Like [`Segment::scan_from`], without decoding: hands `visit` each verified batch's header
    /// and its bytes as stored (CRC and record layout checked, nothing allocated per record).
    /// `visit` may stop the scan with `Ok(false)` or fail it with an error of its own.
    pub fn scan_bytes_from(
        &self,
        offset: u64,
        end_offset: u64,
        chunk_hint: usize,
        mut visit: impl FnMut(&BatchHeader, &[u8]) -> Result<bool, LogError>,
    ) -> Result<(), LogError> {
        let mut visit_error = None;
        self.scan_raw(offset, end_offset, chunk_hint, |bytes| {
            let header = batch::verify(bytes)?;
            match visit(&header, &bytes[..header.total_len]) {
                Ok(more) => Ok(more),
                Err(e) => {
                    visit_error = Some(e);
                    Ok(false)
                }
            }
        })?;
        visit_error.map_or(Ok(()), Err)
    }

    /// The scan loop shared by [`Segment::scan_from`] and [`Segment::scan_bytes_from`]: hands
    /// `visit` the bytes of each batch holding records in [`offset`, `end_offset`); `visit`
    /// verifies them and says whether to go on.
    fn scan_raw(
        &self,
        offset: u64,
        end_offset: u64,
        chunk_hint: usize,
        mut visit: impl FnMut(&[u8]) -> Result<bool, BatchError>,
    ) -> Result<(), LogError> {
        let mut position = self.lookup(offset);
        let chunk = chunk_hint.clamp(SCAN_CHUNK_MIN, SCAN_CHUNK_MAX);
        let mut scanner = Scanner::new(&self.log, self.size_bytes, chunk);
        while position < self.size_bytes {
            let header = scanner
                .header_at(position)
                .and_then(|bytes| BatchHeader::parse(bytes).map_err(ScanError::Batch))
                .map_err(|e| self.read_error(position, e))?;
            if header.base_offset >= end_offset {
                return Ok(());
            }
            if header.next_offset() > offset {
                let more = scanner
                    .batch_at(position)
                    .and_then(|bytes| visit(bytes).map_err(ScanError::Batch))
                    .map_err(|e| self.read_error(position, e))?;
                if !more {
                    return Ok(());
                }
            }
            position += header.total_len as u64;
        }
        Ok(())
    }

    fn read_error(&self, position: u64, e: ScanError) -> LogError {
        match e {
            ScanError::Io(e) => LogError::Io(e),
            ScanError::Batch(e) => LogError::Corrupt(format!(
                "{} at position {position}: {e:?}",
                self.log_path.display()
            )),
        }
    }

    /// Cuts the segment so that it holds no record at or above `offset`. Returns the batch that
    /// straddled `offset` (its records below `offset` must be appended again), if any.
    pub fn truncate_to(&mut self, offset: u64) -> Result<Option<Batch>, LogError> {
        let mut cut = None;
        let mut position = self.lookup(offset);
        let mut scanner = Scanner::new(&self.log, self.size_bytes, SCAN_CHUNK_MIN);
        while position < self.size_bytes {
            let header = scanner
                .header_at(position)
                .and_then(|bytes| BatchHeader::parse(bytes).map_err(ScanError::Batch))
                .map_err(|e| self.read_error(position, e))?;
            if header.next_offset() > offset {
                let straddling = if header.base_offset < offset {
                    let (mut batch, _) = scanner
                        .batch_at(position)
                        .and_then(|bytes| batch::decode(bytes).map_err(ScanError::Batch))
                        .map_err(|e| self.read_error(position, e))?;
                    batch
                        .records
                        .truncate((offset - header.base_offset) as usize);
                    Some(batch)
                } else {
                    None
                };
                cut = Some((position, straddling));
                break;
            }
            position += header.total_len as u64;
        }
        drop(scanner);
        let Some((position, straddling)) = cut else {
            return Err(LogError::Corrupt(format!(
                "{}: offset {offset} not found for truncation",
                self.log_path.display()
            )));
        };
        self.log.set_len(position)?;
        self.size_bytes = position;
        self.index.retain(|e| u64::from(e.position) < position);
        self.index_file
            .set_len((self.index.len() * INDEX_ENTRY_LEN) as u64)?;
        let from = self.index.last().map_or(0, |e| u64::from(e.position));
        let before = self
            .index
            .last()
            .map_or(i64::MIN, |e| e.max_timestamp_before_ms);
        self.max_timestamp_ms = before.max(self.scan_max_timestamp(from, position)?);
        self.bytes_since_index_entry = position - from;
        Ok(straddling)
    }

    /// Largest batch max-timestamp in [from, to), reading batch headers only.
    fn scan_max_timestamp(&self, from: u64, to: u64) -> Result<i64, LogError> {
        let mut scanner = Scanner::new(&self.log, to, SCAN_CHUNK_MIN);
        let mut position = from;
        let mut max_timestamp_ms = i64::MIN;
        while position < to {
            let bytes = scanner
                .header_at(position)
                .map_err(|e| self.read_error(position, e))?;
            let header = BatchHeader::parse(bytes)
                .map_err(|e| self.read_error(position, ScanError::Batch(e)))?;
            max_timestamp_ms = max_timestamp_ms.max(header.max_timestamp_ms);
            position += header.total_len as u64;
        }
        Ok(max_timestamp_ms)
    }

    /// Reads and checks the `.index` file; `None` if it is malformed or does not match the log.
    fn load_index(&self) -> Result<Option<Vec<IndexEntry>>, LogError> {
        let bytes = fs::read(&self.index_path)?;
        if bytes.len() % INDEX_ENTRY_LEN != 0 {
            return Ok(None);
        }
        let entries: Vec<IndexEntry> = bytes
            .chunks_exact(INDEX_ENTRY_LEN)
            .map(IndexEntry::from_bytes)
            .collect();
        let increasing = entries
            .windows(2)
            .all(|w| w[0].relative_offset < w[1].relative_offset && w[0].position < w[1].position);
        let in_file = entries
            .last()
            .is_none_or(|e| u64::from(e.position) <= self.size_bytes);
        let nonzero = entries.first().is_none_or(|e| e.position > 0);
        Ok((increasing && in_file && nonzero).then_some(entries))
    }

    /// Rebuilds the index from batch headers, without CRC checks (for a trusted segment whose
    /// index was lost).
    fn rebuild_index_from_headers(&mut self, index_interval_bytes: u64) -> Result<(), LogError> {
        let mut scanner = Scanner::new(&self.log, self.size_bytes, SCAN_CHUNK_MAX);
        let mut position = 0u64;
        let mut index = Vec::new();
        let mut max_timestamp_ms = i64::MIN;
        let mut since = 0u64;
        let mut next_offset = self.base_offset;
        while position < self.size_bytes {
            let bytes = scanner
                .header_at(position)
                .map_err(|e| self.read_error(position, e))?;
            let header = BatchHeader::parse(bytes)
                .map_err(|e| self.read_error(position, ScanError::Batch(e)))?;
            if position > 0 && since >= index_interval_bytes {
                index.push(IndexEntry {
                    relative_offset: (header.base_offset - self.base_offset) as u32,
                    position: position as u32,
                    max_timestamp_before_ms: max_timestamp_ms,
                });
                since = 0;
            }
            since += header.total_len as u64;
            max_timestamp_ms = max_timestamp_ms.max(header.max_timestamp_ms);
            next_offset = header.next_offset();
            position += header.total_len as u64;
        }
        drop(scanner);
        if position > 0 {
            // The sealing entry, as if the segment had just been rolled.
            index.push(IndexEntry {
                relative_offset: (next_offset - self.base_offset) as u32,
                position: position as u32,
                max_timestamp_before_ms: max_timestamp_ms,
            });
        }
        self.index = index;
        self.max_timestamp_ms = max_timestamp_ms;
        self.write_whole_index()
    }

    fn write_whole_index(&mut self) -> Result<(), LogError> {
        let mut bytes = Vec::with_capacity(self.index.len() * INDEX_ENTRY_LEN);
        for entry in &self.index {
            bytes.extend_from_slice(&entry.to_bytes());
        }
        self.index_file.set_len(0)?;
        self.index_file.write_all_at(&bytes, 0)?;
        Ok(())
    }
}

/// Why the scanner could not hand out a batch.
#[derive(Debug)]
enum ScanError {
    Io(io::Error),
    Batch(BatchError),
}

/// Reads a segment file forward in large chunks and hands out batch byte slices.
struct Scanner<'a> {
    file: &'a File,
    /// Bytes of the file that may be read (the segment's valid size, or the file length).
    end: u64,
    chunk: usize,
    buf: Vec<u8>,
    /// File position of `buf[0]`.
    buf_position: u64,
}

impl<'a> Scanner<'a> {
    fn new(file: &'a File, end: u64, chunk: usize) -> Scanner<'a> {
        Scanner {
            file,
            end,
            chunk,
            buf: Vec::new(),
            buf_position: 0,
        }
    }

    /// The bytes of the whole batch at `position`.
    fn batch_at(&mut self, position: u64) -> Result<&[u8], ScanError> {
        let total_len = BatchHeader::parse(self.range(position, HEADER_LEN)?)
            .map_err(ScanError::Batch)?
            .total_len;
        self.range(position, total_len)
    }

    /// The header bytes of the batch at `position`.
    fn header_at(&mut self, position: u64) -> Result<&[u8], ScanError> {
        self.range(position, HEADER_LEN)
    }

    fn range(&mut self, position: u64, len: usize) -> Result<&[u8], ScanError> {
        if position + len as u64 > self.end {
            return Err(ScanError::Batch(BatchError::Incomplete));
        }
        let buf_end = self.buf_position + self.buf.len() as u64;
        if position < self.buf_position || position + len as u64 > buf_end {
            let want = len.max(self.chunk).min((self.end - position) as usize);
            self.buf.resize(want, 0);
            self.file
                .read_exact_at(&mut self.buf, position)
                .map_err(ScanError::Io)?;
            self.buf_position = position;
        }
        let start = (position - self.buf_position) as usize;
        Ok(&self.buf[start..start + len])
    }
}
