//! Small wrappers over `ip` and `/proc` used by the local backend.

use crate::cluster::{Error, Result};
use std::path::Path;
use std::process::{Command, Stdio};

/// Where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/run/netns";

/// How much of a failed command's stderr an error keeps.
const STDERR_TAIL_MAX: usize = 600;

/// Runs a command to completion; a non-zero exit becomes [`Error::Command`]. Returns stdout.
pub fn run(argv: &[&str]) -> Result<String> {
    let out = Command::new(argv[0])
        .args(&argv[1..])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| Error::io(format!("run `{}`", argv.join(" ")), e))?;
    if out.status.success() {
        return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tail_start = stderr.len().saturating_sub(STDERR_TAIL_MAX);
    let tail_start = (tail_start..stderr.len())
        .find(|i| stderr.is_char_boundary(*i))
        .unwrap_or(stderr.len());
    Err(Error::Command {
        command: argv.join(" "),
        status: out.status.code(),
        stderr: stderr[tail_start..].to_string(),
    })
}

/// Whether a network namespace of that name exists.
pub fn netns_exists(ns: &str) -> bool {
    Path::new(NETNS_DIR).join(ns).exists()
}

/// Whether a network interface of that name exists in the root namespace.
pub fn link_exists(link: &str) -> bool {
    Path::new("/sys/class/net").join(link).exists()
}

/// The processes inside a network namespace (`ip netns pids`).
pub fn netns_pids(ns: &str) -> Result<Vec<i32>> {
    let out = run(&["ip", "netns", "pids", ns])?;
    Ok(out
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect())
}

/// The IPv4 addresses configured on this host's interfaces (root namespace).
pub fn host_ipv4_addrs() -> Result<Vec<std::net::Ipv4Addr>> {
    let out = run(&["ip", "-o", "-4", "addr", "show"])?;
    // Lines look like: `2: eth0    inet 172.17.0.2/16 brd ... scope global eth0`.
    Ok(out
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.find(|w| *w == "inet")?;
            words.next()?.split('/').next()?.parse().ok()
        })
        .collect())
}

/// The IPv4 prefixes of this host's main routing table (`default` left out).
pub fn host_ipv4_routes() -> Result<Vec<(std::net::Ipv4Addr, u8)>> {
    let out = run(&["ip", "-o", "-4", "route", "show", "table", "main"])?;
    Ok(out
        .lines()
        .filter_map(|l| parse_prefix(l.split_whitespace().next()?))
        .collect())
}

/// Parses `A.B.C.D/LEN` or a bare address (a /32).
pub fn parse_prefix(s: &str) -> Option<(std::net::Ipv4Addr, u8)> {
    let (addr, len) = match s.split_once('/') {
        Some((a, l)) => (a, l.parse().ok().filter(|l| *l <= 32)?),
        None => (s, 32),
    };
    Some((addr.parse().ok()?, len))
}

/// Whether two IPv4 prefixes share any address.
pub fn prefixes_overlap(a: (std::net::Ipv4Addr, u8), b: (std::net::Ipv4Addr, u8)) -> bool {
    let len = a.1.min(b.1);
    let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
    u32::from(a.0) & mask == u32::from(b.0) & mask
}

/// The state letter of a process from `/proc/PID/stat` (`R`, `S`, `T` stopped, `Z`, ...).
pub fn process_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name in parentheses may contain spaces; the state follows the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().next()?.chars().next()
}

/// A process's start time in clock ticks since boot (`/proc/PID/stat` field 22).
pub fn process_start_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the parenthesised command name: state is field 3, starttime field 22.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(22 - 3)?.parse().ok()
}

/// Whether something is mounted at `path` (in this process's mount namespace).
pub fn is_mounted(path: &std::path::Path) -> bool {
    let Ok(table) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    // Field 5 is the mount point, with spaces and backslashes escaped as octal.
    let wanted = path
        .to_string_lossy()
        .replace('\\', "\\134")
        .replace(' ', "\\040");
    table
        .lines()
        .any(|line| line.split(' ').nth(4) == Some(wanted.as_str()))
}

/// Whether this process runs as root.
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_overlap_when_one_contains_the_other() {
        let p = |s| parse_prefix(s).unwrap();
        assert!(prefixes_overlap(p("10.77.0.0/24"), p("10.0.0.0/8")));
        assert!(prefixes_overlap(p("10.77.0.0/24"), p("10.77.0.5")));
        assert!(!prefixes_overlap(p("10.77.0.0/24"), p("10.77.1.0/24")));
        assert!(!prefixes_overlap(p("10.77.0.0/24"), p("172.17.0.0/16")));
        assert_eq!(parse_prefix("default"), None);
        assert_eq!(parse_prefix("10.1.2.0/33"), None);
    }
}
