//! Shared by the cluster tests: TCP probes from inside a node's network namespace (or from the
//! host), to see from outside whether a fault is in force.

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::time::{Duration, Instant};
use tidewater::cluster::local::sys;

/// How long one probe waits to connect and to read the answer.
const PROBE_TIMEOUT: Duration = Duration::from_millis(600);

/// Connects to `addr` from inside namespace `ns` (or from the host) and reads one line.
pub fn probe(ns: Option<String>, addr: SocketAddr) -> std::io::Result<String> {
    std::thread::spawn(move || {
        if let Some(ns) = ns {
            let f = std::fs::File::open(Path::new(sys::NETNS_DIR).join(&ns))?;
            // SAFETY: changes only this fresh thread's network namespace.
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        let mut conn = TcpStream::connect_timeout(&addr, PROBE_TIMEOUT)?;
        conn.set_read_timeout(Some(PROBE_TIMEOUT))?;
        let mut line = String::new();
        BufReader::new(&mut conn).read_line(&mut line)?;
        Ok(line.trim().to_string())
    })
    .join()
    .unwrap()
}

/// Probes until the answer matches `want` (Some(text) = answers exactly that, None = silent
/// or refused), within `max`; panics with the last answer otherwise.
pub fn settle_within(ns: Option<String>, addr: SocketAddr, want: Option<&str>, max: Duration) {
    let deadline = Instant::now() + max;
    loop {
        let got = probe(ns.clone(), addr);
        let ok = match (&got, want) {
            (Ok(text), Some(w)) => text == w,
            (Err(_), None) => true,
            _ => false,
        };
        if ok {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "probe of {addr} from {ns:?}: want {want:?}, got {got:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}
