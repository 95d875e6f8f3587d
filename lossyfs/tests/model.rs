//! The durability model through a real mount: what survives a loss of unsynced state and what
//! does not. Each test mounts its own lossyfs (needs /dev/fuse and root) and unmounts it when
//! it ends, pass or fail.

mod common;

use std::fs::{self, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;

use common::{fsync_dir, mount, mount_with, names};
use tidewater_lossyfs::control::{self, status_value};
use tidewater_lossyfs::state::torn_prefix_len;
use tidewater_lossyfs::{Command, Limits, Mode, Options};

fn append(path: &Path, bytes: &[u8]) -> File {
    let mut file = OpenOptions::new().append(true).open(path).unwrap();
    file.write_all(bytes).unwrap();
    file
}

#[test]
fn fsynced_data_survives_a_loss_and_unsynced_appends_do_not() {
    let m = mount(|b| fs::write(b.join("log"), b"durable;").unwrap());
    let file = append(&m.view("log"), b"synced;");
    file.sync_data().unwrap();
    append(&m.view("log"), b"unsynced;");
    assert_eq!(
        fs::read(m.view("log")).unwrap(),
        b"durable;synced;unsynced;"
    );
    assert_eq!(fs::read(m.durable("log")).unwrap(), b"durable;synced;");
    drop(file);

    let report = m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(report.unsynced_files, 1);
    assert_eq!(report.namespace_ops, 0);
    assert_eq!(fs::read(m.view("log")).unwrap(), b"durable;synced;");
    assert_eq!(fs::metadata(m.view("log")).unwrap().len(), 15);
}

#[test]
fn writes_at_offsets_read_back_and_are_undone_by_a_loss() {
    let m = mount(|b| fs::write(b.join("f"), vec![b'a'; 10_000]).unwrap());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.view("f"))
        .unwrap();
    file.write_all_at(b"XYZ", 4094).unwrap();
    file.write_all_at(b"tail", 12_000).unwrap();
    let mut buf = [0u8; 6];
    file.read_exact_at(&mut buf, 4092).unwrap();
    assert_eq!(&buf, b"aaXYZa");
    file.read_exact_at(&mut buf[..4], 10_500).unwrap();
    assert_eq!(&buf[..4], &[0, 0, 0, 0], "a hole reads as zeros");
    assert_eq!(file.metadata().unwrap().len(), 12_004);
    drop(file);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("f")).unwrap(), vec![b'a'; 10_000]);
}

#[test]
fn a_created_file_without_a_directory_fsync_is_gone_even_if_the_file_was_fsynced() {
    let m = mount(|_| {});
    let mut file = File::create(m.view("new")).unwrap();
    file.write_all(b"content").unwrap();
    file.sync_all().unwrap();
    fs::create_dir(m.view("dir")).unwrap();
    assert_eq!(names(&m.mnt), ["dir", "new"]);
    drop(file);

    let report = m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(report.namespace_ops, 2);
    assert!(names(&m.mnt).is_empty());
    assert!(!m.view("new").exists());
}

#[test]
fn a_directory_fsync_makes_a_creation_durable_with_the_content_last_fsynced() {
    let m = mount(|_| {});
    let mut file = File::create(m.view("new")).unwrap();
    file.write_all(b"synced").unwrap();
    file.sync_all().unwrap();
    file.write_all(b"+unsynced").unwrap();
    fsync_dir(&m.mnt);
    let mut empty = File::create(m.view("empty")).unwrap();
    empty.write_all(b"never fsynced").unwrap();
    fsync_dir(&m.mnt);
    drop((file, empty));

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("new")).unwrap(), b"synced");
    assert_eq!(fs::read(m.view("empty")).unwrap(), b"");
}

#[test]
fn write_fsync_rename_without_a_directory_fsync_loses_the_rename() {
    let m = mount(|b| fs::write(b.join("checkpoint"), b"old").unwrap());
    let mut tmp = File::create(m.view("checkpoint.tmp")).unwrap();
    tmp.write_all(b"new").unwrap();
    tmp.sync_all().unwrap();
    drop(tmp);
    fs::rename(m.view("checkpoint.tmp"), m.view("checkpoint")).unwrap();
    assert_eq!(fs::read(m.view("checkpoint")).unwrap(), b"new");
    assert_eq!(names(&m.mnt), ["checkpoint"]);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("checkpoint")).unwrap(), b"old");
    assert_eq!(
        names(&m.mnt),
        ["checkpoint"],
        "the tmp file's creation was lost too"
    );
}

#[test]
fn write_fsync_rename_fsync_dir_survives_a_loss() {
    let m = mount(|b| fs::write(b.join("checkpoint"), b"old").unwrap());
    let mut tmp = File::create(m.view("checkpoint.tmp")).unwrap();
    tmp.write_all(b"new").unwrap();
    tmp.sync_all().unwrap();
    drop(tmp);
    fs::rename(m.view("checkpoint.tmp"), m.view("checkpoint")).unwrap();
    fsync_dir(&m.mnt);
    assert_eq!(fs::read(m.durable("checkpoint")).unwrap(), b"new");

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("checkpoint")).unwrap(), b"new");
    assert_eq!(names(&m.mnt), ["checkpoint"]);
}

#[test]
fn a_rename_over_a_file_without_its_data_fsynced_keeps_the_old_name_and_new_empty_file() {
    // The classic mistake (rename without fsync of the data): the rename is durable, the data
    // of the renamed file is not.
    let m = mount(|b| fs::write(b.join("config"), b"old").unwrap());
    fs::write(m.view("config.tmp"), b"new").unwrap();
    fs::rename(m.view("config.tmp"), m.view("config")).unwrap();
    fsync_dir(&m.mnt);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("config")).unwrap(), b"");
}

#[test]
fn truncations_are_undone_unless_fsynced() {
    let m = mount(|b| {
        fs::write(b.join("a"), vec![1u8; 10_000]).unwrap();
        fs::write(b.join("b"), vec![2u8; 10_000]).unwrap();
    });
    OpenOptions::new()
        .write(true)
        .open(m.view("a"))
        .unwrap()
        .set_len(100)
        .unwrap();
    let b = OpenOptions::new().write(true).open(m.view("b")).unwrap();
    b.set_len(100).unwrap();
    b.sync_all().unwrap();
    b.set_len(5000).unwrap(); // grows with zeros, unsynced
    assert_eq!(fs::metadata(m.view("a")).unwrap().len(), 100);
    drop(b);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("a")).unwrap(), vec![1u8; 10_000]);
    assert_eq!(fs::read(m.view("b")).unwrap(), vec![2u8; 100]);
}

#[test]
fn unlinks_are_undone_unless_the_directory_is_fsynced() {
    let m = mount(|b| {
        fs::write(b.join("kept"), b"k").unwrap();
        fs::write(b.join("gone"), b"g").unwrap();
        fs::create_dir(b.join("dir")).unwrap();
    });
    fs::remove_file(m.view("kept")).unwrap();
    fs::remove_dir(m.view("dir")).unwrap();
    assert_eq!(names(&m.mnt), ["gone"]);
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(names(&m.mnt), ["dir", "gone", "kept"]);
    assert_eq!(fs::read(m.view("kept")).unwrap(), b"k");

    fs::remove_file(m.view("gone")).unwrap();
    fsync_dir(&m.mnt);
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(names(&m.mnt), ["dir", "kept"]);
}

#[test]
fn a_cross_directory_rename_is_durable_after_an_fsync_of_either_directory() {
    let m = mount(|b| {
        fs::create_dir(b.join("d1")).unwrap();
        fs::create_dir(b.join("d2")).unwrap();
        fs::create_dir(b.join("d3")).unwrap();
        fs::write(b.join("d1/f"), b"f").unwrap();
        fs::write(b.join("d1/g"), b"g").unwrap();
    });
    // Not committed by the fsync of d2: d3 shares nothing with what it commits.
    File::create(m.view("d3/unrelated")).unwrap();
    fs::rename(m.view("d1/f"), m.view("d2/f")).unwrap();
    fsync_dir(&m.view("d2"));
    fs::rename(m.view("d1/g"), m.view("d2/g")).unwrap();
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(names(&m.view("d1")), ["g"]);
    assert_eq!(names(&m.view("d2")), ["f"]);
    assert!(names(&m.view("d3")).is_empty());
    assert_eq!(fs::read(m.view("d2/f")).unwrap(), b"f");
}

#[test]
fn an_fsync_of_a_new_directory_makes_its_entries_and_its_own_creation_durable() {
    let m = mount(|_| {});
    fs::create_dir_all(m.view("topic-0")).unwrap();
    let mut segment = File::create(m.view("topic-0/0.log")).unwrap();
    segment.write_all(b"batch").unwrap();
    segment.sync_all().unwrap();
    fsync_dir(&m.view("topic-0"));
    // An empty directory fsynced by itself is not made durable (its parent was not fsynced).
    fs::create_dir(m.view("empty")).unwrap();
    fsync_dir(&m.view("empty"));
    drop(segment);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(names(&m.mnt), ["topic-0"]);
    assert_eq!(fs::read(m.view("topic-0/0.log")).unwrap(), b"batch");
}

#[test]
fn a_torn_loss_keeps_a_seeded_prefix_of_the_last_unsynced_write() {
    for seed in 0..5 {
        let m = mount(|b| fs::write(b.join("log"), b"base:").unwrap());
        drop(append(&m.view("log"), b"first-lost;"));
        drop(append(&m.view("log"), b"0123456789"));
        let report = m.handle.lose_unsynced(Mode::Torn { seed }).unwrap();

        let kept = torn_prefix_len(seed, Path::new("log"), 10);
        assert!(kept < 10);
        let mut expected = b"base:".to_vec();
        if kept > 0 {
            // The earlier unsynced write is lost: its bytes read as zeros before the prefix.
            expected.extend_from_slice(&[0u8; 11]);
            expected.extend_from_slice(&b"0123456789"[..kept as usize]);
        }
        assert_eq!(fs::read(m.view("log")).unwrap(), expected, "seed {seed}");
        assert_eq!(report.torn_writes.len(), 1);
        assert_eq!(report.torn_writes[0].kept, kept);
        assert_eq!(report.torn_writes[0].offset, 16);
    }
}

#[test]
fn the_control_file_takes_commands_reports_status_and_is_not_listed() {
    let m = mount(|b| fs::write(b.join("f"), b"durable").unwrap());
    drop(append(&m.view("f"), b"+more"));
    File::create(m.view("g")).unwrap();
    let status = control::read_status(&m.mnt).unwrap();
    assert_eq!(status_value(&status, "unsynced_files"), Some("1"));
    assert_eq!(status_value(&status, "pending_namespace_ops"), Some("1"));
    assert_eq!(names(&m.mnt), ["f", "g"], "the control file is hidden");

    control::send(&m.mnt, Command::LoseUnsynced(Mode::Clean)).unwrap();
    assert_eq!(fs::read(m.view("f")).unwrap(), b"durable");
    let status = control::read_status(&m.mnt).unwrap();
    assert_eq!(status_value(&status, "losses"), Some("1"));
    assert_eq!(status_value(&status, "last_loss_namespace_ops"), Some("1"));

    let mut ctl = OpenOptions::new()
        .write(true)
        .open(m.view(tidewater_lossyfs::CONTROL_FILE_NAME))
        .unwrap();
    let error = ctl.write_all(b"format c:\n").unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EINVAL));

    drop(append(&m.view("f"), b"+synced"));
    control::send(&m.mnt, Command::Sync).unwrap();
    assert_eq!(fs::read(m.durable("f")).unwrap(), b"durable+synced");
    assert!(fs::remove_file(m.view(tidewater_lossyfs::CONTROL_FILE_NAME)).is_err());
}

#[test]
fn a_file_open_across_a_loss_fails_instead_of_showing_lost_data() {
    let m = mount(|b| fs::write(b.join("f"), b"durable").unwrap());
    let mut file = OpenOptions::new()
        .read(true)
        .append(true)
        .open(m.view("f"))
        .unwrap();
    file.write_all(b"+lost").unwrap();
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    let mut buf = Vec::new();
    assert!(file.read_to_end(&mut buf).is_err());
    assert!(file.write_all(b"x").is_err());
    assert_eq!(fs::read(m.view("f")).unwrap(), b"durable");
}

#[test]
fn an_open_file_unlinked_durably_keeps_its_data_until_closed_and_is_gone_after_a_loss() {
    let m = mount(|b| fs::write(b.join("f"), b"durable").unwrap());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.view("f"))
        .unwrap();
    fs::remove_file(m.view("f")).unwrap();
    fsync_dir(&m.mnt);
    assert!(!m.durable("f").exists());
    file.write_all_at(b"D", 0).unwrap();
    file.sync_all().unwrap();
    let mut buf = [0u8; 7];
    file.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"Durable");
    drop(file);
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert!(names(&m.mnt).is_empty());
}

#[test]
fn dirty_memory_past_its_bound_is_written_back_as_a_kernel_would() {
    let options = Options {
        limits: Limits {
            dirty_bytes_max: 16 * 4096,
            ..Limits::default()
        },
        ..Options::default()
    };
    let m = mount_with(options, |b| fs::write(b.join("big"), b"").unwrap());
    let mut file = OpenOptions::new().append(true).open(m.view("big")).unwrap();
    for i in 0..100u8 {
        file.write_all(&[i; 4096]).unwrap();
    }
    drop(file);
    // Each time a 17th page is dirtied, the file is written back whole: after pages 17, 34,
    // 51, 68 and 85.
    assert_eq!(m.handle.status().writebacks, 5);
    m.handle.lose_unsynced(Mode::Clean).unwrap();
    let kept = fs::read(m.view("big")).unwrap();
    assert_eq!(kept.len(), 85 * 4096);
    assert!(kept[84 * 4096..].iter().all(|&b| b == 84));
}

#[test]
fn names_of_lossyfs_itself_cannot_be_created_and_errors_follow_posix() {
    let m = mount(|b| {
        fs::create_dir(b.join("dir")).unwrap();
        fs::write(b.join("dir/f"), b"").unwrap();
    });
    assert!(fs::create_dir(m.view(".lossyfs")).is_err());
    assert_eq!(
        fs::remove_dir(m.view("dir")).unwrap_err().raw_os_error(),
        Some(libc::ENOTEMPTY)
    );
    assert_eq!(
        fs::rename(m.view("dir"), m.view("dir/sub"))
            .unwrap_err()
            .raw_os_error(),
        Some(libc::EINVAL)
    );
    assert_eq!(
        File::options()
            .write(true)
            .create_new(true)
            .open(m.view("dir/f"))
            .unwrap_err()
            .kind(),
        ErrorKind::AlreadyExists
    );
    assert_eq!(
        fs::remove_file(m.view("missing")).unwrap_err().kind(),
        ErrorKind::NotFound
    );
}

#[test]
fn a_file_replaced_by_a_durable_rename_while_open_stays_readable_through_its_handle() {
    let m = mount(|b| fs::write(b.join("name"), b"old").unwrap());
    let old = File::open(m.view("name")).unwrap();
    let mut new = File::create(m.view("name.tmp")).unwrap();
    new.write_all(b"new").unwrap();
    new.sync_all().unwrap();
    drop(new);
    fs::rename(m.view("name.tmp"), m.view("name")).unwrap();
    fsync_dir(&m.mnt);
    assert_eq!(fs::read(m.durable("name")).unwrap(), b"new");
    let mut buf = [0u8; 3];
    old.read_exact_at(&mut buf, 0).unwrap();
    assert_eq!(&buf, b"old");
    drop(old);

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    assert_eq!(fs::read(m.view("name")).unwrap(), b"new");
    assert_eq!(names(&m.mnt), ["name"]);
}

/// A shared writable mapping of `len` bytes of `file`.
fn map_shared(file: &File, len: usize) -> *mut u8 {
    use std::os::fd::AsRawFd;
    // SAFETY: a fresh mapping of an open file; the callers unmap it before the file drops.
    let addr = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        )
    };
    assert_ne!(
        addr,
        libc::MAP_FAILED,
        "shared mmap: {}",
        std::io::Error::last_os_error()
    );
    addr.cast()
}

/// Kafka's index files are written through `MappedByteBuffer` and made durable by `force()`
/// (msync), and a power loss SIGKILLs the process holding the mapping. What it wrote to the
/// mapping and synced survives the loss; what it wrote after is gone, whether read back
/// through `read` or through a new mapping.
#[test]
fn a_mapping_synced_by_msync_survives_a_loss_and_pages_written_after_do_not() {
    const PAGE: usize = 4096;
    let m = mount(|b| fs::write(b.join("index"), vec![0u8; 2 * PAGE]).unwrap());
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .open(m.view("index"))
        .unwrap();
    let map = map_shared(&file, 2 * PAGE);
    // SAFETY: the child only writes into the mapping and makes async-signal-safe calls.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
    if child == 0 {
        // SAFETY: `map` is 2 pages long; msync and kill are async-signal-safe.
        unsafe {
            std::ptr::copy_nonoverlapping(b"synced".as_ptr(), map, 6);
            libc::msync(map.cast(), 2 * PAGE, libc::MS_SYNC);
            std::ptr::copy_nonoverlapping(b"unsynced".as_ptr(), map.add(PAGE), 8);
            libc::kill(libc::getpid(), libc::SIGKILL);
            libc::_exit(0);
        }
    }
    // SAFETY: the parent's own mapping, no longer used.
    unsafe { libc::munmap(map.cast(), 2 * PAGE) };
    drop(file);
    let mut status = 0;
    // SAFETY: our own child.
    assert_eq!(unsafe { libc::waitpid(child, &mut status, 0) }, child);
    assert!(libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGKILL);

    // The killed child's dirty page was written back on its exit: the view has both writes,
    // the backing directory only the synced one.
    let before = fs::read(m.view("index")).unwrap();
    assert_eq!(&before[..6], b"synced");
    assert_eq!(&before[PAGE..PAGE + 8], b"unsynced");
    assert_eq!(
        &fs::read(m.durable("index")).unwrap()[PAGE..PAGE + 8],
        [0u8; 8]
    );

    m.handle.lose_unsynced(Mode::Clean).unwrap();
    let mut expected = vec![0u8; 2 * PAGE];
    expected[..6].copy_from_slice(b"synced");
    assert_eq!(fs::read(m.view("index")).unwrap(), expected, "read(2)");
    let file = File::open(m.view("index")).unwrap();
    use std::os::fd::AsRawFd;
    // SAFETY: a read-only mapping of the reopened file, unmapped before it drops.
    let seen = unsafe {
        let addr = libc::mmap(
            std::ptr::null_mut(),
            2 * PAGE,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            0,
        );
        assert_ne!(addr, libc::MAP_FAILED);
        let seen = std::slice::from_raw_parts(addr.cast::<u8>(), 2 * PAGE).to_vec();
        libc::munmap(addr, 2 * PAGE);
        seen
    };
    assert_eq!(seen, expected, "a new mapping");
}
