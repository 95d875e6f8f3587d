//! [`Overlay`]: the volatile content of one regular file, as dirty pages over its durable
//! backing file.
//!
//! The backing file holds the file's durable content (what the last fsync made durable). The
//! overlay holds everything written since: whole pages copied from the backing file on first
//! write, and the volatile length. Reading merges the two; flushing writes the pages into the
//! backing file, which is what an fsync does here; dropping the overlay is what a power loss
//! does.

use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Size of one dirty page. Small enough that an append dirties little, large enough that the
/// page map stays short.
pub const PAGE_BYTES: u64 = 4096;

/// Largest contiguous run of pages written to the backing file with one `pwrite` on flush.
const FLUSH_RUN_BYTES_MAX: usize = 1024 * 1024;

/// The volatile state of one regular file.
///
/// Invariants: `clean_len <= len`; in every dirty page the bytes at or beyond `len` are zero;
/// the backing file is at least `clean_len` long.
#[derive(Debug, Default)]
pub struct Overlay {
    /// Length of the file as the mounted view shows it.
    len: u64,
    /// Bytes `[0, clean_len)` of the backing file show through where no page is dirty; a page
    /// that is not dirty reads as zeros from here on. A truncation lowers it, so that bytes
    /// cut off and later re-exposed by growing the file read as zeros, not as stale data.
    clean_len: u64,
    /// Pages written since the last flush, by page index.
    pages: BTreeMap<u64, Box<[u8]>>,
    /// The last write since the last flush, as (offset, length), while nothing but writes
    /// followed the flush; what a torn loss keeps a prefix of.
    last_write: Option<(u64, u64)>,
    /// Whether content or length differ from the backing file (a truncation can leave no
    /// dirty page and still need a flush).
    unsynced: bool,
}

impl Overlay {
    /// An overlay with no changes over a backing file of `len` bytes.
    pub fn durable(len: u64) -> Overlay {
        Overlay {
            len,
            clean_len: len,
            ..Overlay::default()
        }
    }

    /// Length of the file in the mounted view.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether the file differs from its durable content.
    pub fn is_unsynced(&self) -> bool {
        self.unsynced
    }

    /// Memory held by dirty pages, in bytes.
    pub fn dirty_bytes(&self) -> u64 {
        self.pages.len() as u64 * PAGE_BYTES
    }

    /// Whether reads or writes may need the backing file (some durable bytes show through).
    pub fn needs_backing(&self) -> bool {
        self.clean_len > 0
    }

    /// The last write since the last flush, if nothing else changed the file after it.
    pub fn last_write(&self) -> Option<(u64, u64)> {
        self.last_write
    }

    /// Reads up to `size` bytes at `offset` (fewer at the end of the file).
    pub fn read(&self, backing: Option<&File>, offset: u64, size: u64) -> io::Result<Vec<u8>> {
        let end = offset.saturating_add(size).min(self.len);
        if offset >= end {
            return Ok(Vec::new());
        }
        let mut buf = vec![0u8; (end - offset) as usize];
        let clean_end = end.min(self.clean_len);
        if offset < clean_end {
            let backing = backing.expect("durable bytes show through, so a backing file exists");
            read_at_zero_filled(backing, &mut buf[..(clean_end - offset) as usize], offset)?;
        }
        for (&index, page) in self
            .pages
            .range(offset / PAGE_BYTES..=(end - 1) / PAGE_BYTES)
        {
            let page_start = index * PAGE_BYTES;
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_BYTES);
            buf[(from - offset) as usize..(to - offset) as usize]
                .copy_from_slice(&page[(from - page_start) as usize..(to - page_start) as usize]);
        }
        Ok(buf)
    }

    /// Writes `data` at `offset`, growing the file if it ends past the current length.
    pub fn write(&mut self, backing: Option<&File>, offset: u64, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        let end = offset
            .checked_add(data.len() as u64)
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EFBIG))?;
        for index in offset / PAGE_BYTES..=(end - 1) / PAGE_BYTES {
            let page_start = index * PAGE_BYTES;
            if !self.pages.contains_key(&index) {
                let page = self.load_page(backing, index)?;
                self.pages.insert(index, page);
            }
            let page = self.pages.get_mut(&index).expect("inserted above");
            let from = offset.max(page_start);
            let to = end.min(page_start + PAGE_BYTES);
            page[(from - page_start) as usize..(to - page_start) as usize]
                .copy_from_slice(&data[(from - offset) as usize..(to - offset) as usize]);
        }
        self.len = self.len.max(end);
        self.last_write = Some((offset, data.len() as u64));
        self.unsynced = true;
        Ok(())
    }

    /// Sets the length: cuts pages off or lets the file grow with zeros.
    pub fn truncate(&mut self, len: u64) {
        if len == self.len {
            return;
        }
        if len < self.len {
            let first_cut = len.div_ceil(PAGE_BYTES);
            self.pages.split_off(&first_cut);
            if !len.is_multiple_of(PAGE_BYTES) {
                if let Some(page) = self.pages.get_mut(&(len / PAGE_BYTES)) {
                    page[(len % PAGE_BYTES) as usize..].fill(0);
                }
            }
            self.clean_len = self.clean_len.min(len);
        }
        self.len = len;
        self.last_write = None;
        self.unsynced = true;
    }

    /// Makes the volatile content durable: writes it into `backing` (the file's durable home)
    /// and forgets the dirty pages. This is fsync's effect in the model.
    pub fn flush(&mut self, backing: &File) -> io::Result<()> {
        if !self.unsynced {
            return Ok(());
        }
        // Bytes between the clean length and the old backing length were cut off by a
        // truncation: cut them in the backing file too, so that growing it again gives zeros.
        if backing.metadata()?.len() > self.clean_len {
            backing.set_len(self.clean_len)?;
        }
        backing.set_len(self.len)?;
        let mut run: Vec<u8> = Vec::new();
        let mut run_start = 0;
        for (&index, page) in &self.pages {
            let page_start = index * PAGE_BYTES;
            let bytes = &page[..(self.len - page_start).min(PAGE_BYTES) as usize];
            let contiguous = page_start == run_start + run.len() as u64;
            if !run.is_empty() && (!contiguous || run.len() >= FLUSH_RUN_BYTES_MAX) {
                backing.write_all_at(&run, run_start)?;
                run.clear();
            }
            if run.is_empty() {
                run_start = page_start;
            }
            run.extend_from_slice(bytes);
        }
        if !run.is_empty() {
            backing.write_all_at(&run, run_start)?;
        }
        self.pages.clear();
        self.clean_len = self.len;
        self.last_write = None;
        self.unsynced = false;
        Ok(())
    }

    /// Forgets every change since the last flush (the file is unreachable, or lost power).
    pub fn forget_unsynced(&mut self, durable_len: u64) {
        *self = Overlay::durable(durable_len);
    }

    /// Writes the first `kept` bytes of the last write into `backing`, as a disk that tore
    /// that write would have left them. Returns how many bytes were kept.
    pub fn tear_last_write(&self, backing: &File, kept: u64) -> io::Result<u64> {
        let Some((offset, length)) = self.last_write else {
            return Ok(0);
        };
        let kept = kept.min(length);
        if kept == 0 {
            return Ok(0);
        }
        let bytes = self.read(Some(backing), offset, kept)?;
        backing.write_all_at(&bytes, offset)?;
        Ok(bytes.len() as u64)
    }

    /// A page as the file shows it before any write to it: durable bytes, zeros after them.
    fn load_page(&self, backing: Option<&File>, index: u64) -> io::Result<Box<[u8]>> {
        let mut page = vec![0u8; PAGE_BYTES as usize].into_boxed_slice();
        let page_start = index * PAGE_BYTES;
        if page_start < self.clean_len {
            let backing = backing.expect("durable bytes show through, so a backing file exists");
            let n = (self.clean_len - page_start).min(PAGE_BYTES) as usize;
            read_at_zero_filled(backing, &mut page[..n], page_start)?;
        }
        Ok(page)
    }
}

/// Reads `buf.len()` bytes at `offset`; bytes past the end of the file read as zeros.
fn read_at_zero_filled(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    let mut done = 0;
    while done < buf.len() {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf[done..].fill(0);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backing_with(bytes: &[u8]) -> (tempfile::NamedTempFile, File) {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), bytes).unwrap();
        let file = File::options()
            .read(true)
            .write(true)
            .open(tmp.path())
            .unwrap();
        (tmp, file)
    }

    fn contents(file: &File) -> Vec<u8> {
        let len = file.metadata().unwrap().len();
        let mut buf = vec![0; len as usize];
        file.read_exact_at(&mut buf, 0).unwrap();
        buf
    }

    #[test]
    fn writes_show_in_reads_and_reach_the_backing_file_only_on_flush() {
        let (_tmp, file) = backing_with(b"durable!");
        let mut overlay = Overlay::durable(8);
        overlay.write(Some(&file), 8, b" and more").unwrap();
        overlay.write(Some(&file), 0, b"D").unwrap();
        assert_eq!(
            overlay.read(Some(&file), 0, 100).unwrap(),
            b"Durable! and more"
        );
        assert_eq!(contents(&file), b"durable!");
        assert!(overlay.is_unsynced());
        overlay.flush(&file).unwrap();
        assert_eq!(contents(&file), b"Durable! and more");
        assert!(!overlay.is_unsynced());
        assert_eq!(overlay.dirty_bytes(), 0);
    }

    #[test]
    fn writes_spanning_pages_and_holes_read_back_exactly() {
        let (_tmp, file) = backing_with(b"");
        let mut overlay = Overlay::durable(0);
        let data: Vec<u8> = (0..3 * PAGE_BYTES as usize + 17)
            .map(|i| (i % 251) as u8)
            .collect();
        overlay.write(Some(&file), 100, &data).unwrap();
        overlay
            .write(Some(&file), 10 * PAGE_BYTES, b"far away")
            .unwrap();
        let all = overlay.read(Some(&file), 0, u64::MAX).unwrap();
        assert_eq!(all.len() as u64, 10 * PAGE_BYTES + 8);
        assert!(all[..100].iter().all(|&b| b == 0));
        assert_eq!(&all[100..100 + data.len()], &data[..]);
        assert!(all[100 + data.len()..10 * PAGE_BYTES as usize]
            .iter()
            .all(|&b| b == 0));
        overlay.flush(&file).unwrap();
        assert_eq!(contents(&file), all);
    }

    #[test]
    fn truncation_then_growth_reads_zeros_not_stale_bytes() {
        let (_tmp, file) = backing_with(&[7u8; 10_000]);
        let mut overlay = Overlay::durable(10_000);
        overlay.truncate(5000);
        overlay.truncate(9000);
        let all = overlay.read(Some(&file), 0, u64::MAX).unwrap();
        assert_eq!(all.len(), 9000);
        assert!(all[..5000].iter().all(|&b| b == 7));
        assert!(all[5000..].iter().all(|&b| b == 0));
        assert_eq!(contents(&file), vec![7u8; 10_000], "not durable yet");
        overlay.flush(&file).unwrap();
        assert_eq!(contents(&file), all);
    }

    #[test]
    fn truncation_zeroes_the_tail_of_a_dirty_page() {
        let (_tmp, file) = backing_with(b"");
        let mut overlay = Overlay::durable(0);
        overlay.write(Some(&file), 0, b"abcdef").unwrap();
        overlay.truncate(2);
        overlay.truncate(6);
        assert_eq!(
            overlay.read(Some(&file), 0, 6).unwrap(),
            b"ab\0\0\0\0".to_vec()
        );
    }

    #[test]
    fn forgetting_returns_to_the_durable_content() {
        let (_tmp, file) = backing_with(b"kept");
        let mut overlay = Overlay::durable(4);
        overlay.write(Some(&file), 4, b" lost").unwrap();
        overlay.truncate(2);
        overlay.forget_unsynced(4);
        assert_eq!(overlay.read(Some(&file), 0, 100).unwrap(), b"kept");
        assert!(!overlay.is_unsynced());
    }

    #[test]
    fn tearing_keeps_a_prefix_of_the_last_write_only() {
        let (_tmp, file) = backing_with(b"base");
        let mut overlay = Overlay::durable(4);
        overlay.write(Some(&file), 4, b"-first").unwrap();
        overlay.write(Some(&file), 10, b"-second").unwrap();
        assert_eq!(overlay.last_write(), Some((10, 7)));
        assert_eq!(overlay.tear_last_write(&file, 3).unwrap(), 3);
        // The first unsynced write is lost (zeros), the second keeps its first 3 bytes.
        assert_eq!(contents(&file), b"base\0\0\0\0\0\0-se".to_vec());
    }

    #[test]
    fn a_truncation_after_the_last_write_leaves_nothing_to_tear() {
        let (_tmp, file) = backing_with(b"base");
        let mut overlay = Overlay::durable(4);
        overlay.write(Some(&file), 4, b"-more").unwrap();
        overlay.truncate(6);
        assert_eq!(overlay.last_write(), None);
        assert_eq!(overlay.tear_last_write(&file, 3).unwrap(), 0);
        assert_eq!(contents(&file), b"base");
    }
}
