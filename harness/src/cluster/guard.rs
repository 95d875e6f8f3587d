//! Safety net: every live cluster of this process (local or ssh) is torn down on SIGINT,
//! SIGTERM or SIGHUP (after [`install_signal_handlers`]); clusters also tear down on drop, and
//! thereby on a panic that unwinds past their owner.
//!
//! The signal handler only writes the signal number to a pipe; a thread of ours reads it, tears
//! every registered cluster down (heal, resume, stop, delete namespaces and bridge) and exits
//! with status 128 + signal, as a shell reports a signal death; a hook set by the CLI then
//! records the interrupted run (results `unknown`, the index). A second signal during the
//! teardown exits at once and says to run `tidewater clean` (the run record lets it finish
//! the job).

use std::sync::atomic::{AtomicI32, AtomicUsize, Ordering};
use std::sync::{Mutex, Once, Weak};

/// Something that must be torn down when the harness is interrupted.
pub trait Teardown: Send + Sync {
    /// Heal, resume, stop, remove; idempotent.
    fn teardown(&self) -> crate::cluster::Result<()>;

    /// Names it in messages, e.g. `local cluster ab12`.
    fn label(&self) -> String;
}

/// Clusters to tear down on a signal. Weak, so a dropped cluster is not kept alive.
static LIVE: Mutex<Vec<Weak<dyn Teardown>>> = Mutex::new(Vec::new());

/// The write end of the signal pipe (-1 until installed).
static SIGNAL_PIPE_WRITE: AtomicI32 = AtomicI32::new(-1);

static INSTALL: Once = Once::new();

/// Remembers a cluster for teardown on a signal.
pub fn register(cluster: Weak<dyn Teardown>) {
    let mut live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
    live.retain(|w| w.strong_count() > 0);
    live.push(cluster);
}

/// Tears down every live cluster of this process. Returns how many there were.
pub fn teardown_all() -> usize {
    let live: Vec<_> = {
        let live = LIVE.lock().unwrap_or_else(|p| p.into_inner());
        live.iter().filter_map(Weak::upgrade).collect()
    };
    for cluster in &live {
        if let Err(e) = cluster.teardown() {
            say(&format!(
                "tidewater: teardown of {} failed: {e}",
                cluster.label()
            ));
        }
    }
    live.len()
}

/// A line to standard error that cannot fail: when stderr is a pipe whose reader is gone (a
/// `tidewater detect` that started this run was killed), `eprintln!` would panic and the
/// teardown would never happen.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

/// Signals received so far; a second one while tearing down exits at once.
static SIGNALS_RECEIVED: AtomicUsize = AtomicUsize::new(0);

/// Whether a signal has asked this process to stop: work that starts clusters (a benchmark's
/// next run) must not start once it has.
pub fn interrupted() -> bool {
    SIGNALS_RECEIVED.load(Ordering::SeqCst) > 0
}

/// Said on a second signal, when the teardown may be half done.
const LEFT_BEHIND: &[u8] =
    b"\ntidewater: exiting at once: namespaces, the bridge, network rules or \
broker processes may be left behind; run `tidewater clean` to remove them\n";

extern "C" fn on_signal(sig: libc::c_int) {
    if SIGNALS_RECEIVED.fetch_add(1, Ordering::SeqCst) > 0 {
        // The user insists (a second Ctrl-C): leave now; `tidewater clean` removes the rest.
        // SAFETY: write(2) and _exit(2) are async-signal-safe; the buffer is static.
        unsafe {
            libc::write(2, LEFT_BEHIND.as_ptr().cast(), LEFT_BEHIND.len());
            libc::_exit(128 + sig)
        };
    }
    let fd = SIGNAL_PIPE_WRITE.load(Ordering::Relaxed);
    if fd >= 0 {
        let byte = sig as u8;
        // SAFETY: write(2) is async-signal-safe; the buffer is a live local.
        unsafe {
            libc::write(fd, (&byte as *const u8).cast(), 1);
        }
    }
}

/// Installs handlers for SIGINT, SIGTERM and SIGHUP that tear down every live cluster
/// and exit with 128 + the signal number. Idempotent.
///
/// A caller that wants to handle Ctrl-C itself (finish the run gracefully) need not call
/// this; dropping the cluster, or `Cluster::teardown`, still cleans up.
pub fn install_signal_handlers() -> std::io::Result<()> {
    let mut result = Ok(());
    INSTALL.call_once(|| result = install());
    result
}

fn install() -> std::io::Result<()> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: fds is a valid array of two ints.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let [read_fd, write_fd] = fds;
    SIGNAL_PIPE_WRITE.store(write_fd, Ordering::Relaxed);
    std::thread::Builder::new()
        .name("tidewater-signals".into())
        .spawn(move || wait_for_signal(read_fd))?;
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only calls write(2) on a pipe.
        let previous = unsafe {
            libc::signal(
                sig,
                on_signal as extern "C" fn(libc::c_int) as *const () as libc::sighandler_t,
            )
        };
        if previous == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn wait_for_signal(read_fd: libc::c_int) {
    let mut byte = 0u8;
    loop {
        // SAFETY: reading one byte into a live local.
        let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
        if n == 1 {
            break;
        }
        if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        return;
    }
    let sig = byte as i32;
    say(&format!(
        "tidewater: signal {sig} received: healing the network and stopping every node \
         (again to exit at once)"
    ));
    let n = teardown_all();
    say(&format!("tidewater: tore down {n} cluster(s); exiting"));
    let hook = ON_INTERRUPT
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(hook) = hook {
        hook(sig);
    }
    std::process::exit(128 + sig);
}

/// Called on the signal thread after the teardown, before exiting: what the interrupted run
/// still owes its user (its results marked unknown, the store's index).
type InterruptHook = Box<dyn FnOnce(i32) + Send>;

static ON_INTERRUPT: Mutex<Option<InterruptHook>> = Mutex::new(None);

/// Sets what to do after the teardown when a signal interrupts the harness (replacing any
/// earlier hook; `None` clears it).
pub fn set_on_interrupt(hook: Option<InterruptHook>) {
    *ON_INTERRUPT.lock().unwrap_or_else(|p| p.into_inner()) = hook;
}
