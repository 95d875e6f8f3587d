//! Renders the report of a generated 1,000,000-operation history (2,000,000 history lines:
//! every operation is an invocation and a completion) and prints the time and the size.
//!
//! `cargo bench -p tidewater-reports --bench render [-- OPS]`. The budget (issue 6): under
//! 10 s and under 5 MB. Results are recorded in docs/PERFORMANCE.md.
//!
//! `-- txn [TXNS]` renders a transactional run instead: `checker::txn_gen`'s correct history
//! of TXNS transactions (50,000 by default: about 100,000 operations), checked by the real
//! checker first (its time is printed apart), so that the report draws transactions in the
//! timeline and every cycle the checker found.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::Path;
use std::time::Instant;

/// Client lanes (concurrent workers).
const LANES: u64 = 10;
/// Partitions written to and polled.
const KEYS: u64 = 8;
/// Nanoseconds between a completion and the lane's next invocation.
const THINK_NS: u64 = 200_000;
/// A fault every this many ns, lasting `FAULT_NS`.
const FAULT_EVERY_NS: u64 = 30_000_000_000;
const FAULT_NS: u64 = 10_000_000_000;

/// xorshift64*: a fixed seed keeps every run of the benchmark identical.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Event {
    /// A lane completes the op it invoked.
    Complete { lane: u64 },
    /// A lane invokes its next op.
    Invoke { lane: u64 },
    /// The nemesis starts (true) or stops a fault.
    Fault { n: u64, start: bool },
}

struct Lane {
    process: u64,
    f: &'static str,
    key: u64,
    value: u64,
}

struct Generator {
    rng: Rng,
    lanes: Vec<Lane>,
    offsets: Vec<u64>,
    polled: Vec<u64>,
    next_value: u64,
    index: u64,
    ops: u64,
    ops_max: u64,
    faulty: bool,
    /// (key, offset, value, ack index) of some acknowledged sends, to serve as lost writes.
    lost: Vec<(u64, u64, u64, u64)>,
    /// The values acknowledged per key, by offset: what the final reads return.
    log: Vec<Vec<u64>>,
}

impl Generator {
    fn latency_ns(&mut self) -> u64 {
        let base = 1_000_000 + self.rng.below(4_000_000);
        let spike = if self.rng.below(1000) == 0 {
            self.rng.below(500_000_000)
        } else {
            0
        };
        let fault = if self.faulty {
            self.rng.below(40_000_000)
        } else {
            0
        };
        base + spike + fault
    }

    fn line(&mut self, out: &mut impl Write, time: u64, event: &Event) -> std::io::Result<()> {
        let index = self.index;
        self.index += 1;
        let mut s = String::with_capacity(200);
        match *event {
            Event::Fault { n, start } => {
                let kind = ["kill", "pause", "partition"][(n % 3) as usize];
                let verb = if start { "start" } else { "stop" };
                self.faulty = start;
                let _ = write!(
                    s,
                    r#"{{"index":{index},"time":{time},"process":"nemesis","type":"info","f":"{verb}-{kind}","value":["n{}"]}}"#,
                    n % 3 + 1
                );
            }
            Event::Invoke { lane } => {
                let send = self.rng.below(10) < 7;
                let key = self.rng.below(KEYS);
                self.next_value += 1;
                let value = self.next_value;
                let l = &mut self.lanes[lane as usize];
                (l.f, l.key, l.value) = (if send { "send" } else { "poll" }, key, value);
                let v = if send {
                    format!(r#"[["send","t0/{key}",{value}]]"#)
                } else {
                    r#"[["poll"]]"#.into()
                };
                let _ = write!(
                    s,
                    r#"{{"index":{index},"time":{time},"process":{},"type":"invoke","f":"{}","value":{v}}}"#,
                    l.process, l.f
                );
            }
            Event::Complete { lane } => {
                self.ops += 1;
                let roll = self.rng.below(1000);
                let kind = if roll < 2 {
                    "info"
                } else if roll < 15 || (self.faulty && roll < 100) {
                    "fail"
                } else {
                    "ok"
                };
                let (f, key, value, process) = {
                    let l = &self.lanes[lane as usize];
                    (l.f, l.key, l.value, l.process)
                };
                let k = key as usize;
                let mut hw = self.offsets[k];
                // Now and then a lagging leader: the watermark goes back a little.
                if self.rng.below(20_000) == 0 {
                    hw = hw.saturating_sub(3);
                }
                let v = match (f, kind) {
                    ("send", "ok") => {
                        let offset = self.offsets[k];
                        self.offsets[k] += 1;
                        self.log[k].push(value);
                        hw = hw.max(offset + 1);
                        if self.rng.below(20_000) == 0 {
                            self.lost.push((key, offset, value, index));
                        }
                        format!(r#"[["send","t0/{key}",[{offset},{value}]]]"#)
                    }
                    ("send", _) => format!(r#"[["send","t0/{key}",{value}]]"#),
                    (_, "ok") => {
                        let from = self.polled[k];
                        let to = (from + 5).min(self.offsets[k]);
                        self.polled[k] = to;
                        let recs: Vec<String> =
                            (from..to).map(|o| format!("[{o},{}]", o * 7 + 1)).collect();
                        format!(r#"[["poll",{{"t0/{key}":[{}]}}]]"#, recs.join(","))
                    }
                    _ => r#"[["poll"]]"#.to_string(),
                };
                let _ = write!(
                    s,
                    r#"{{"index":{index},"time":{time},"process":{process},"type":"{kind}","f":"{f}","value":{v}"#
                );
                if kind == "ok" {
                    let _ = write!(s, r#","high_watermarks":{{"t0/{key}":{hw}}}"#);
                } else if kind == "fail" {
                    s.push_str(r#","error":"NOT_ENOUGH_REPLICAS""#);
                }
                s.push('}');
                if kind == "info" {
                    // A process whose op ended info never invokes again.
                    self.lanes[lane as usize].process += LANES;
                }
            }
        }
        s.push('\n');
        out.write_all(s.as_bytes())
    }
}

/// Records per final read.
const FINAL_PAGE: usize = 500;

/// The final reads: every key paged from offset 0 by a fresh process, returning every
/// acknowledged value but the ones chosen as lost.
fn final_reads(g: &mut Generator, out: &mut impl Write, time_end: u64) {
    let lost: std::collections::BTreeSet<u64> = g.lost.iter().map(|l| l.2).collect();
    let mut time = time_end + 1_000_000_000;
    for k in 0..KEYS as usize {
        let process = 1_000_000 + k as u64;
        let log = std::mem::take(&mut g.log[k]);
        let len = log.len();
        for (page, chunk) in log.chunks(FINAL_PAGE).enumerate() {
            let records: Vec<String> = chunk
                .iter()
                .enumerate()
                .filter(|(_, v)| !lost.contains(v))
                .map(|(i, v)| format!("[{},{v}]", page * FINAL_PAGE + i))
                .collect();
            let index = g.index;
            g.index += 2;
            writeln!(
                out,
                r#"{{"index":{index},"time":{time},"process":{process},"type":"invoke","f":"poll","value":[["poll"]],"final":true}}"#
            )
            .unwrap();
            writeln!(
                out,
                r#"{{"index":{},"time":{},"process":{process},"type":"ok","f":"poll","value":[["poll",{{"t0/{k}":[{}]}}]],"high_watermarks":{{"t0/{k}":{len}}},"log_start_offsets":{{"t0/{k}":0}},"final":true}}"#,
                index + 1,
                time + 1_000_000,
                records.join(",")
            )
            .unwrap();
            time += 2_000_000;
        }
        g.log[k] = log;
    }
}

/// Writes a run directory with `ops` operations; returns the history's size in bytes.
fn generate(dir: &Path, ops: u64) -> u64 {
    let path = dir.join("history.jsonl");
    let mut out = BufWriter::with_capacity(1 << 20, std::fs::File::create(&path).unwrap());
    let mut g = Generator {
        rng: Rng(0x05EE_D7DE_u64),
        lanes: (0..LANES)
            .map(|p| Lane {
                process: p,
                f: "send",
                key: 0,
                value: 0,
            })
            .collect(),
        offsets: vec![0; KEYS as usize],
        polled: vec![0; KEYS as usize],
        next_value: 0,
        index: 0,
        ops: 0,
        ops_max: ops,
        faulty: false,
        lost: Vec::new(),
        log: vec![Vec::new(); KEYS as usize],
    };
    let mut heap: BinaryHeap<Reverse<(u64, Event)>> = BinaryHeap::new();
    for lane in 0..LANES {
        heap.push(Reverse((lane * 1000, Event::Invoke { lane })));
    }
    heap.push(Reverse((
        FAULT_EVERY_NS,
        Event::Fault { n: 0, start: true },
    )));
    let mut unseen = Vec::new();
    let mut unseen_next = 0;
    let mut time_end = 0;
    while let Some(Reverse((time, event))) = heap.pop() {
        if g.ops >= g.ops_max && !matches!(event, Event::Complete { .. }) {
            continue;
        }
        g.line(&mut out, time, &event).unwrap();
        time_end = time;
        match event {
            Event::Invoke { lane } => {
                let latency = g.latency_ns();
                heap.push(Reverse((time + latency, Event::Complete { lane })));
            }
            Event::Complete { lane } => {
                heap.push(Reverse((time + THINK_NS, Event::Invoke { lane })))
            }
            Event::Fault { n, start: true } => {
                heap.push(Reverse((time + FAULT_NS, Event::Fault { n, start: false })))
            }
            Event::Fault { n, start: false } => heap.push(Reverse((
                time + FAULT_EVERY_NS - FAULT_NS,
                Event::Fault {
                    n: n + 1,
                    start: true,
                },
            ))),
        }
        if g.index >= unseen_next {
            unseen_next += 10_000;
            unseen.push(format!("[{time},{}]", g.rng.below(50)));
        }
    }
    final_reads(&mut g, &mut out, time_end);
    out.flush().unwrap();

    let mut lost_by_key = std::collections::BTreeMap::new();
    for (k, ..) in &g.lost {
        *lost_by_key.entry(format!("t0/{k}")).or_insert(0u64) += 1;
    }
    let lost_by_key: Vec<String> = lost_by_key
        .iter()
        .map(|(k, n)| format!(r#""{k}":{n}"#))
        .collect();
    let acked: usize = g.log.iter().map(Vec::len).sum();
    let examples: Vec<String> = g
        .lost
        .iter()
        .map(|(k, o, v, i)| {
            format!(r#"{{"key":"t0/{k}","offset":{o},"value":{v},"acks":"all","ack_op":{i}}}"#)
        })
        .collect();
    let results = format!(
        r#"{{"valid":false,"promise":"broken","promise_reason":"acks=all lost writes",
        "anomalies":{{"lost-write":{{"count":{},"invalidates":true,"breaks_promise":true,"examples":[{}]}},
        "unseen":{{"count":3,"examples":[]}}}},"stats":{{"unseen_series":[{}],
        "sends":{{"acked":{acked}}},
        "lost_acknowledged":{{"total":{},"by_key":{{{}}},"of_acked":{acked},"final_reads_completed":true}}}}}}"#,
        g.lost.len(),
        examples.join(","),
        unseen.join(","),
        g.lost.len(),
        lost_by_key.join(",")
    );
    std::fs::write(dir.join("results.json"), results).unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"name":"bench","seed":1,"acks":"all","nemesis":"kill,pause,partition","settings":{"min.insync.replicas":2}}"#,
    )
    .unwrap();
    let mut samples = BufWriter::new(std::fs::File::create(dir.join("samples.jsonl")).unwrap());
    let mut t = 0;
    while t <= time_end {
        for key in 0..KEYS {
            for node in 1..=3 {
                let isr = if (t / FAULT_EVERY_NS) % 2 == 1 {
                    r#"["n1","n2"]"#
                } else {
                    r#"["n1","n2","n3"]"#
                };
                writeln!(
                    samples,
                    r#"{{"time":{t},"key":"t0/{key}","isr":{isr},"leader":"n1","leader_epoch":1,"high_watermark":{},"node":"n{node}"}}"#,
                    // The log grew about linearly: place the sampled watermark on that line.
                    g.offsets[key as usize] * t / time_end.max(1)
                )
                .unwrap();
            }
        }
        t += 1_000_000_000;
    }
    samples.flush().unwrap();
    std::fs::metadata(&path).unwrap().len()
}

/// CPU time of this process (user + system), from /proc: the machine is shared, so wall
/// time alone says little about the renderer.
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start at field 3.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split(' ').collect();
    let utime: f64 = fields.get(11)?.parse().ok()?;
    let stime: f64 = fields.get(12)?.parse().ok()?;
    // The kernel counts in clock ticks, 100 per second on Linux's usual USER_HZ.
    Some((utime + stime) / 100.0)
}

/// VmHWM of this process: the generator holds almost nothing, so this is the renderer's peak.
fn peak_rss() -> Option<String> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    Some(line["VmHWM:".len()..].trim().to_string())
}

/// Writes a transactional run of `txns` transactions into `dir` (history, the checker's
/// results, config); returns the history's size in bytes.
fn generate_txn_run(dir: &Path, txns: u64) -> u64 {
    use tidewater_workloads::checker::txn_gen::{generate_txns, TxnGenConfig};
    use tidewater_workloads::checker::{check_file, CheckSettings};
    let ops = generate_txns(TxnGenConfig {
        seed: 7,
        txns,
        ..Default::default()
    });
    let path = dir.join("history.jsonl");
    let mut out = BufWriter::new(std::fs::File::create(&path).unwrap());
    for op in &ops {
        serde_json::to_writer(&mut out, op).unwrap();
        out.write_all(b"\n").unwrap();
    }
    out.flush().unwrap();
    drop(out);
    let started = Instant::now();
    let results = check_file(&path, &CheckSettings::default()).unwrap();
    println!(
        "checked {} ops in {:.1} s (not part of the render): {} anomalies, cycles {}",
        ops.len(),
        started.elapsed().as_secs_f64(),
        results.anomalies.len(),
        results.stats["transactions"]["cycles"]
    );
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string(&results).unwrap(),
    )
    .unwrap();
    std::fs::write(
        dir.join("config.json"),
        r#"{"name":"bench-txn","seed":7,"workload":"txn","acks":"all"}"#,
    )
    .unwrap();
    std::fs::metadata(&path).unwrap().len()
}

fn main() {
    // `cargo bench` passes `--bench`; a number among the arguments overrides the op count
    // (the transaction count with `txn`).
    let txn = std::env::args().any(|a| a == "txn");
    let count: Option<u64> = std::env::args().skip(1).find_map(|a| a.parse().ok());
    // TIDEWATER_BENCH_DIR keeps the generated run (to render it again with another build).
    let temp = tempfile::tempdir().unwrap();
    let kept = std::env::var_os("TIDEWATER_BENCH_DIR").map(std::path::PathBuf::from);
    if let Some(d) = &kept {
        std::fs::create_dir_all(d).unwrap();
    }
    let dir = kept.as_deref().unwrap_or(temp.path());
    let started = Instant::now();
    let (what, history_bytes) = if txn {
        let txns = count.unwrap_or(50_000);
        (format!("{txns} transactions"), generate_txn_run(dir, txns))
    } else {
        let ops = count.unwrap_or(1_000_000);
        (format!("{ops} ops"), generate(dir, ops))
    };
    println!(
        "generated {what} ({:.0} MB history) in {:.1} s",
        history_bytes as f64 / 1e6,
        started.elapsed().as_secs_f64()
    );
    let started = Instant::now();
    let cpu_started = cpu_seconds();
    let report = tidewater_reports::render_run(dir).unwrap();
    let elapsed = started.elapsed().as_secs_f64();
    let cpu = cpu_seconds()
        .zip(cpu_started)
        .map(|(end, start)| end - start);
    let size = std::fs::metadata(&report).unwrap().len();
    println!(
        "render_run: {elapsed:.2} s wall, {} s CPU, report.html {:.2} MB, peak RSS {}",
        cpu.map_or("?".to_string(), |c| format!("{c:.2}")),
        size as f64 / 1e6,
        peak_rss().unwrap_or_else(|| "?".to_string())
    );
    let html = std::fs::read_to_string(&report).unwrap();
    println!(
        "lost writes drawn from the history agree with stats.lost_acknowledged: {}",
        html.contains("The checker's count agrees")
    );
    if let Ok(keep) = std::env::var("TIDEWATER_BENCH_KEEP") {
        std::fs::copy(&report, &keep).unwrap();
        println!("copied the report to {keep}");
    }
}
