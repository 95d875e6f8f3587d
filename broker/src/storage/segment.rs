//! One segment of a partition log: a `.log` file of record batches and its sparse `.index`.
//!
//! Index entries are 16 bytes, big-endian: `relative_offset u32` (base offset of a batch minus
//! the segment's base offset), `position u32` (where that batch starts in the `.log` file), and
//! `max_timestamp_before_ms i64` (the largest record timestamp of all batches before that
//! position, `i64::MIN` if none). An entry is added when at least `index.interval.bytes` were
//! appended since the previous one. When a segment is rolled, a final entry pointing at the end
//! of the file seals it, so the segment's largest timestamp is known on open without a scan.
//!
//! Reads trust neither the index nor the headers of the batches they skip: a scan starts at an
//! index entry only once the header there carries the entry's offset (otherwise the index is
//! rebuilt from the headers), and every header after it must start where the batch before it
//! ended and end inside the file. A damaged length, count, base offset or index entry thus
//! fails the read (`Corrupt`) instead of landing it on a later batch.

use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::RwLock;

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

/// A batch start that a scan may begin at: its byte position, its base offset and the largest
/// timestamp of the batches before it. Every header a scan meets after it is checked to follow
/// on from it, so a scan never trusts a position it has not linked up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Anchor {
    position: u64,
    offset: u64,
    max_timestamp_before_ms: i64,
}

impl Anchor {
    /// The start of a segment: position 0 holds the batch at the segment's base offset.
    fn start(base_offset: u64) -> Anchor {
        Anchor {
            position: 0,
            offset: base_offset,
            max_timestamp_before_ms: i64::MIN,
        }
    }
}

/// What walking a segment's batch headers from an anchor found (headers only, no CRC checks).
struct HeaderWalk {
    /// Index entries for the walked batches, one per `index.interval.bytes`.
    index: Vec<IndexEntry>,
    /// Largest timestamp of the batches before the anchor and of the walked batches.
    max_timestamp_ms: i64,
    /// Position after the last batch that linked up.
    end_position: u64,
    /// Offset after that batch.
    next_offset: u64,
    /// Why the walk stopped before the end of the segment, if it did: the chain of batches is
    /// broken there (the log itself is damaged).
    broken: Option<String>,
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
    /// The sparse index, mirrored in memory so lookups need no I/O. Behind a lock only because
    /// a read (which holds `&self`) that finds an entry disagreeing with the log rebuilds it;
    /// the log is used under its partition's lock, so the lock is never contended.
    index: RwLock<Vec<IndexEntry>>,
    /// `index.interval.bytes` when the segment was opened: the spacing of a rebuilt index.
    index_interval_bytes: u64,
    /// Bytes of valid batches in the `.log` file; the next batch is written here.
    size_bytes: u64,
    /// Largest record timestamp in the segment (`i64::MIN` while empty); drives time retention.
    max_timestamp_ms: i64,
    /// Bytes appended since the last index entry.
    bytes_since_index_entry: u64,
}

impl Segment {
    /// Creates a new, empty segment (fails if its `.log` exists). When it fails, neither file
    /// is left behind: a `.log` without its segment would make every later attempt fail with
    /// "File exists" (issue 22: a roll that ran out of file descriptors wedged the partition).
    pub fn create(
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Segment, LogError> {
        let log_path = dir.join(log_file_name(base_offset));
        let index_path = dir.join(index_file_name(base_offset));
        let log = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&log_path)?;
        let opened = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&index_path);
        let index_file = match opened {
            Ok(file) => file,
            Err(error) => {
                drop(log);
                // The `.log` is ours (create_new) and empty; an `.index` never got created.
                if let Err(e) = fs::remove_file(&log_path) {
                    tracing::warn!(segment = %log_path.display(), "removing a half-created segment: {e}");
                }
                return Err(LogError::Io(error));
            }
        };
        Ok(Segment {
            base_offset,
            log,
            index_file,
            log_path,
            index_path,
            index: RwLock::new(Vec::new()),
            index_interval_bytes,
            size_bytes: 0,
            max_timestamp_ms: i64::MIN,
            bytes_since_index_entry: 0,
        })
    }

    /// Opens an existing segment without reading its batches, for segments below the recovery
    /// point (fsynced before it was advanced). The index file is used if it is well-formed,
    /// sealed, and its last entries agree with the batch headers at the end of the log (a walk
    /// over at most `index.interval.bytes`). Otherwise it is rebuilt from the batch headers; if
    /// those are damaged too, the segment is kept with what could be indexed and every read
    /// that reaches the damage fails.
    pub fn open_trusted(
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Segment, LogError> {
        let mut segment = Segment::open_files(dir, base_offset, index_interval_bytes)?;
        segment.size_bytes = segment.log.metadata()?.len();
        let loaded = segment
            .load_index()?
            .filter(|index| segment.is_sealed_by(index));
        if let Some(index) = &loaded {
            if segment.tail_matches(index)? {
                segment.max_timestamp_ms =
                    index.last().map_or(i64::MIN, |e| e.max_timestamp_before_ms);
                *segment.index.get_mut().expect("segment index lock") = loaded.expect("checked");
                return Ok(segment);
            }
        }
        tracing::warn!(
            segment = %segment.log_path.display(),
            "offset index missing or not matching the log; rebuilding it from the batch headers"
        );
        let walk = segment.walk_headers(Anchor::start(base_offset), index_interval_bytes)?;
        let (index, max_timestamp_ms) = match (walk.broken, loaded) {
            (None, _) => {
                let mut index = walk.index;
                if walk.end_position > 0 {
                    index.push(segment.sealing_entry(walk.next_offset, walk.max_timestamp_ms));
                }
                write_index_file(&segment.index_file, &index)?;
                (index, walk.max_timestamp_ms)
            }
            (Some(why), loaded) => {
                tracing::warn!(
                    segment = %segment.log_path.display(),
                    "segment is damaged ({why}); reads that reach the damage fail"
                );
                match loaded {
                    Some(index) => {
                        let max = index.last().map_or(i64::MIN, |e| e.max_timestamp_before_ms);
                        (index, max)
                    }
                    None => (walk.index, walk.max_timestamp_ms),
                }
            }
        };
        segment.max_timestamp_ms = max_timestamp_ms;
        *segment.index.get_mut().expect("segment index lock") = index;
        Ok(segment)
    }

    /// Opens an existing segment and verifies every batch (header, CRC, offsets following on
    /// from `base_offset`) from the recovery point on: batches before the last index entry at or
    /// below `recovery_point` were fsynced and are trusted, if that entry points at a batch
    /// with its offset (else everything is verified). Everything from the first bad batch on is
    /// cut off the file. The index is rebuilt from the valid batches.
    pub fn open_verified(
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
        recovery_point: u64,
    ) -> Result<(Segment, Verified), LogError> {
        let mut segment = Segment::open_files(dir, base_offset, index_interval_bytes)?;
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
                let resume = trusted
                    .checked_sub(1)
                    .map(|i| segment.anchor_of(&entries[i]));
                let points_at_its_batch = match resume {
                    Some(anchor) => segment.header_base_at(anchor.position)? == Some(anchor.offset),
                    None => false,
                };
                if let (Some(resume), true) = (resume, points_at_its_batch) {
                    index.extend_from_slice(&entries[..trusted - 1]);
                    position = resume.position;
                    next_offset = resume.offset;
                    max_timestamp_ms = resume.max_timestamp_before_ms;
                    // Makes the loop below add the resume entry back for its batch.
                    bytes_since_index_entry = index_interval_bytes;
                } else if resume.is_some() {
                    tracing::warn!(
                        segment = %segment.log_path.display(),
                        "offset index entry does not point at its batch; verifying the segment"
                    );
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
        segment.max_timestamp_ms = max_timestamp_ms;
        segment.bytes_since_index_entry = bytes_since_index_entry;
        write_index_file(&segment.index_file, &index)?;
        *segment.index.get_mut().expect("segment index lock") = index;
        let verified = Verified {
            verified_from,
            next_offset,
            truncated,
            epoch_starts,
        };
        Ok((segment, verified))
    }

    fn open_files(
        dir: &Path,
        base_offset: u64,
        index_interval_bytes: u64,
    ) -> Result<Segment, LogError> {
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
            index: RwLock::new(Vec::new()),
            index_interval_bytes,
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
        self.index_read().len()
    }

    fn index_read(&self) -> std::sync::RwLockReadGuard<'_, Vec<IndexEntry>> {
        self.index.read().expect("segment index lock")
    }

    fn index_mut(&mut self) -> &mut Vec<IndexEntry> {
        self.index.get_mut().expect("segment index lock")
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
        let at = (self.index_mut().len() * INDEX_ENTRY_LEN) as u64;
        self.index_file.write_all_at(&entry.to_bytes(), at)?;
        self.index_mut().push(entry);
        Ok(())
    }

    /// Seals a segment that will get no more appends: a final index entry at the end of the
    /// file (records the largest timestamp), then fsync of both files.
    ///
    /// Sealing twice adds one entry, and a segment whose roll failed after its seal takes
    /// appends again: the sealing entry then indexes the next batch, which starts there.
    pub fn seal(&mut self, next_offset: u64) -> Result<(), LogError> {
        let sealed = self
            .index_read()
            .last()
            .is_some_and(|e| u64::from(e.position) == self.size_bytes);
        if self.size_bytes > 0 && !sealed {
            let entry = self.sealing_entry(next_offset, self.max_timestamp_ms);
            self.push_index_entry(entry)?;
            self.bytes_since_index_entry = 0;
        }
        self.sync()
    }

    /// The index entry that seals a segment ending at `next_offset`: it points at the end of
    /// the file and carries the segment's largest timestamp.
    fn sealing_entry(&self, next_offset: u64, max_timestamp_ms: i64) -> IndexEntry {
        IndexEntry {
            relative_offset: u32::try_from(next_offset - self.base_offset).unwrap_or(u32::MAX),
            position: self.size_bytes as u32,
            max_timestamp_before_ms: max_timestamp_ms,
        }
    }

    /// Whether `index` ends with the sealing entry (an empty index seals an empty segment).
    fn is_sealed_by(&self, index: &[IndexEntry]) -> bool {
        index.last().map_or(self.size_bytes == 0, |e| {
            u64::from(e.position) == self.size_bytes
        })
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

    /// The anchor an index entry describes.
    fn anchor_of(&self, entry: &IndexEntry) -> Anchor {
        Anchor {
            position: u64::from(entry.position),
            offset: self.base_offset + u64::from(entry.relative_offset),
            max_timestamp_before_ms: entry.max_timestamp_before_ms,
        }
    }

    /// The largest indexed batch whose base offset is <= `offset` (the segment start if none),
    /// as the index has it.
    fn lookup(&self, offset: u64) -> Anchor {
        let relative = offset
            .saturating_sub(self.base_offset)
            .min(u64::from(u32::MAX)) as u32;
        let index = self.index_read();
        let idx = index.partition_point(|e| e.relative_offset <= relative);
        idx.checked_sub(1)
            .map_or(Anchor::start(self.base_offset), |i| {
                self.anchor_of(&index[i])
            })
    }

    /// Where a scan for `offset` starts: the index's anchor for it, once the header at its
    /// position is seen to carry its offset. An entry that does not match its batch means the
    /// index is damaged: it is rebuilt from the batch headers first (which fails as `Corrupt`
    /// if the chain of batches is broken, i.e. the log itself is damaged).
    fn scan_start(&self, offset: u64) -> Result<Anchor, LogError> {
        let anchor = self.lookup(offset);
        if anchor.position == 0 || self.header_base_at(anchor.position)? == Some(anchor.offset) {
            return Ok(anchor);
        }
        tracing::warn!(
            segment = %self.log_path.display(),
            position = anchor.position,
            offset = anchor.offset,
            "offset index entry does not point at a batch with its offset; rebuilding the index"
        );
        self.repair_index()?;
        Ok(self.lookup(offset))
    }

    /// The base offset in the batch header at `position`, if one parses there.
    fn header_base_at(&self, position: u64) -> Result<Option<u64>, LogError> {
        if position + HEADER_LEN as u64 > self.size_bytes {
            return Ok(None);
        }
        let mut header = [0u8; HEADER_LEN];
        self.log.read_exact_at(&mut header, position)?;
        Ok(BatchHeader::parse(&header).ok().map(|h| h.base_offset))
    }

    /// Rebuilds the in-memory index and the `.index` file from the batch headers, keeping the
    /// sealing entry if the index had one. Fails (`Corrupt`) if the batches do not link up.
    fn repair_index(&self) -> Result<(), LogError> {
        let walk = self.walk_headers(Anchor::start(self.base_offset), self.index_interval_bytes)?;
        if let Some(why) = walk.broken {
            return Err(LogError::Corrupt(format!(
                "{}: {why}",
                self.log_path.display()
            )));
        }
        let mut index = walk.index;
        if self.is_sealed_by(&self.index_read()) && self.size_bytes > 0 {
            index.push(self.sealing_entry(walk.next_offset, walk.max_timestamp_ms));
        }
        write_index_file(&self.index_file, &index)?;
        *self.index.write().expect("segment index lock") = index;
        Ok(())
    }

    /// Checks that the batch whose header is at `position` follows on from the one before it:
    /// it starts at `expected`, ends inside the segment, and fits the index's 32-bit fields.
    /// Batches a scan skips by their header are not CRC-checked, so this is what keeps a
    /// damaged length, count or base offset from making a scan land on a later batch.
    fn check_link(&self, position: u64, header: &BatchHeader, expected: u64) -> Result<(), String> {
        if header.base_offset != expected {
            return Err(format!(
                "batch at position {position} starts at offset {}, expected {expected}",
                header.base_offset
            ));
        }
        let end = position + header.total_len as u64;
        if end > self.size_bytes {
            return Err(format!(
                "batch at position {position} ({} bytes) runs past the end of the segment at {}",
                header.total_len, self.size_bytes
            ));
        }
        if end > u64::from(u32::MAX)
            || header.next_offset() - self.base_offset > u64::from(u32::MAX)
        {
            return Err(format!(
                "batch at position {position} exceeds the index's 32-bit range"
            ));
        }
        Ok(())
    }

    /// Walks the batch headers from `from` to the end of the segment, checking that each batch
    /// follows on from the one before, and collects index entries every `index_interval_bytes`.
    fn walk_headers(
        &self,
        from: Anchor,
        index_interval_bytes: u64,
    ) -> Result<HeaderWalk, LogError> {
        let mut walk = HeaderWalk {
            index: Vec::new(),
            max_timestamp_ms: from.max_timestamp_before_ms,
            end_position: from.position,
            next_offset: from.offset,
            broken: None,
        };
        let mut scanner = Scanner::new(&self.log, self.size_bytes, SCAN_CHUNK_MAX);
        let mut since = 0u64;
        while walk.end_position < self.size_bytes {
            let position = walk.end_position;
            let parsed = scanner
                .header_at(position)
                .and_then(|bytes| BatchHeader::parse(bytes).map_err(ScanError::Batch));
            let header = match parsed {
                Ok(header) => header,
                Err(ScanError::Io(e)) => return Err(LogError::Io(e)),
                Err(ScanError::Batch(e)) => {
                    walk.broken = Some(format!("batch header at position {position}: {e:?}"));
                    break;
                }
            };
            if let Err(why) = self.check_link(position, &header, walk.next_offset) {
                walk.broken = Some(why);
                break;
            }
            if position > 0 && since >= index_interval_bytes {
                walk.index.push(IndexEntry {
                    relative_offset: (header.base_offset - self.base_offset) as u32,
                    position: position as u32,
                    max_timestamp_before_ms: walk.max_timestamp_ms,
                });
                since = 0;
            }
            since += header.total_len as u64;
            walk.max_timestamp_ms = walk.max_timestamp_ms.max(header.max_timestamp_ms);
            walk.next_offset = header.next_offset();
            walk.end_position = position + header.total_len as u64;
        }
        Ok(walk)
    }

    /// Whether a sealed index agrees with the end of the log: the batches from the entry
    /// before the sealing one link up to the end of the file, ending at the sealing entry's
    /// offset, with the sealing entry's largest timestamp. Reads check the other entries as
    /// they use them.
    fn tail_matches(&self, index: &[IndexEntry]) -> Result<bool, LogError> {
        let Some((seal, before)) = index.split_last() else {
            return Ok(self.size_bytes == 0);
        };
        let from = before
            .last()
            .map_or(Anchor::start(self.base_offset), |e| self.anchor_of(e));
        let walk = self.walk_headers(from, u64::MAX)?;
        Ok(walk.broken.is_none()
            && walk.next_offset == self.base_offset + u64::from(seal.relative_offset)
            && walk.max_timestamp_ms == seal.max_timestamp_before_ms)
    }

    /// Decoded batches holding records in [`offset`, `end_offset`), in order, until `visit`
    /// returns `Ok(false)` or an error. Batches wholly below `offset` are skipped by their
    /// header (linked up, not CRC-checked); every batch handed to `visit` was CRC-checked.
    pub fn scan_from(
        &self,
        offset: u64,
        end_offset: u64,
        chunk_hint: usize,
        mut visit: impl FnMut(Batch) -> Result<bool, LogError>,
    ) -> Result<(), LogError> {
        let mut visit_error = None;
        self.scan_raw(offset, end_offset, chunk_hint, |bytes| {
            let (batch, _) = batch::decode(bytes)?;
            match visit(batch) {
                Ok(more) => Ok(more),
                Err(e) => {
                    visit_error = Some(e);
                    Ok(false)
                }
            }
        })?;
        visit_error.map_or(Ok(()), Err)
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

    /// The scan loop shared by [`Segment::scan_from`] and [`Segment::scan_bytes_from`]: from a
    /// checked anchor, links up every header and hands `visit` the bytes of each batch holding
    /// records in [`offset`, `end_offset`); `visit` verifies them and says whether to go on.
    fn scan_raw(
        &self,
        offset: u64,
        end_offset: u64,
        chunk_hint: usize,
        mut visit: impl FnMut(&[u8]) -> Result<bool, BatchError>,
    ) -> Result<(), LogError> {
        let anchor = self.scan_start(offset)?;
        let (mut position, mut expected) = (anchor.position, anchor.offset);
        let chunk = chunk_hint.clamp(SCAN_CHUNK_MIN, SCAN_CHUNK_MAX);
        let mut scanner = Scanner::new(&self.log, self.size_bytes, chunk);
        while position < self.size_bytes {
            let header = scanner
                .header_at(position)
                .and_then(|bytes| BatchHeader::parse(bytes).map_err(ScanError::Batch))
                .map_err(|e| self.read_error(position, e))?;
            self.check_link(position, &header, expected)
                .map_err(|why| self.corrupt(why))?;
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
            expected = header.next_offset();
            position += header.total_len as u64;
        }
        Ok(())
    }

    fn read_error(&self, position: u64, e: ScanError) -> LogError {
        match e {
            ScanError::Io(e) => LogError::Io(e),
            ScanError::Batch(e) => self.corrupt(format!("at position {position}: {e:?}")),
        }
    }

    fn corrupt(&self, why: String) -> LogError {
        LogError::Corrupt(format!("{}: {why}", self.log_path.display()))
    }

    /// Cuts the segment so that it holds no record at or above `offset`. Returns the batch that
    /// straddled `offset` (its records below `offset` must be appended again), if any.
    pub fn truncate_to(&mut self, offset: u64) -> Result<Option<Batch>, LogError> {
        let mut cut = None;
        let anchor = self.scan_start(offset)?;
        let (mut position, mut expected) = (anchor.position, anchor.offset);
        let mut scanner = Scanner::new(&self.log, self.size_bytes, SCAN_CHUNK_MIN);
        while position < self.size_bytes {
            let header = scanner
                .header_at(position)
                .and_then(|bytes| BatchHeader::parse(bytes).map_err(ScanError::Batch))
                .map_err(|e| self.read_error(position, e))?;
            self.check_link(position, &header, expected)
                .map_err(|why| self.corrupt(why))?;
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
            expected = header.next_offset();
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
        let index = self.index_mut();
        index.retain(|e| u64::from(e.position) < position);
        let (from, before) = index.last().map_or((0, i64::MIN), |e| {
            (u64::from(e.position), e.max_timestamp_before_ms)
        });
        let index_len = index.len();
        self.index_file
            .set_len((index_len * INDEX_ENTRY_LEN) as u64)?;
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
}

/// Replaces the content of an `.index` file with `index`.
fn write_index_file(file: &File, index: &[IndexEntry]) -> Result<(), LogError> {
    let mut bytes = Vec::with_capacity(index.len() * INDEX_ENTRY_LEN);
    for entry in index {
        bytes.extend_from_slice(&entry.to_bytes());
    }
    file.set_len(0)?;
    file.write_all_at(&bytes, 0)?;
    Ok(())
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
