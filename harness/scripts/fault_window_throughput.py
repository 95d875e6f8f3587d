#!/usr/bin/env python3
"""Throughput per partition around one fault of a stored run, from its history.jsonl alone.

Usage: fault_window_throughput.py RUN_DIR [--fault pause|partition|kill] [--nth N]

Finds the N-th (default first) nemesis op `start-FAULT` and the next `stop-FAULT`, and prints,
for every partition, the acknowledged ops (ok sends and ok polls of that partition) per second
in three windows of the fault's length: before it, during it, and after it. A partition whose
throughput drops during a fault on another partition's leader is starved by the workload,
not by the broker. Used for docs/PERFORMANCE.md ("Throughput per partition during a fault").
"""

import argparse
import json
import os
import sys
from collections import defaultdict


def keys_of(op):
    """The partitions an ok client op acknowledged: a send's key, a poll's keys."""
    out = []
    for micro in op.get("value") or []:
        if not isinstance(micro, list) or not micro:
            continue
        if micro[0] == "send" and len(micro) >= 2:
            out.append(micro[1])
        elif micro[0] == "poll" and len(micro) >= 2 and isinstance(micro[1], dict):
            out.extend(micro[1].keys())
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run_dir")
    parser.add_argument("--fault", default="pause", choices=["pause", "partition", "kill"])
    parser.add_argument("--nth", type=int, default=1)
    args = parser.parse_args()

    with open(os.path.join(args.run_dir, "history.jsonl")) as f:
        ops = [json.loads(line) for line in f if line.strip()]
    starts = [o for o in ops if o["process"] == "nemesis" and o["f"] == f"start-{args.fault}"]
    if len(starts) < args.nth:
        sys.exit(f"only {len(starts)} start-{args.fault} ops in the history")
    start = starts[args.nth - 1]
    stop = next(
        (o for o in ops if o["process"] == "nemesis" and o["f"] == f"stop-{args.fault}"
         and o["time"] > start["time"]),
        None,
    )
    if stop is None:
        sys.exit(f"no stop-{args.fault} after the start at {start['time'] / 1e9:.1f} s")
    t0, t1 = start["time"], stop["time"]
    length = t1 - t0
    # The main phase starts with the first client op; the window before the fault starts no
    # earlier, and the one after it ends no later than the last non-final client op.
    client = [o["time"] for o in ops if o["process"] != "nemesis" and not o.get("final")]
    first, last = min(client), max(client)
    windows = [
        ("before", max(first, t0 - length), t0),
        ("during", t0, t1),
        ("after", t1, min(last, t1 + length)),
    ]

    counts = defaultdict(lambda: [0, 0, 0])
    sends = defaultdict(lambda: [0, 0, 0])
    for op in ops:
        if op["process"] == "nemesis" or op["type"] != "ok" or op.get("final"):
            continue
        if op["f"] not in ("send", "poll"):
            continue
        for i, (_, lo, hi) in enumerate(windows):
            if lo <= op["time"] < hi:
                for key in keys_of(op):
                    counts[key][i] += 1
                    if op["f"] == "send":
                        sends[key][i] += 1
    by_node = defaultdict(lambda: defaultdict(int))
    for op in ops:
        if (op["process"] != "nemesis" and op["type"] == "ok" and op["f"] == "send"
                and t0 <= op["time"] < t1):
            for key in keys_of(op):
                by_node[key][op.get("node")] += 1
    secs = [(hi - lo) / 1e9 for (_, lo, hi) in windows]
    print(f"start-{args.fault} {json.dumps(start['value'])} at {t0 / 1e9:.1f} s, "
          f"stop at {t1 / 1e9:.1f} s; windows before/during/after: "
          + "/".join(f"{x:.1f}" for x in secs) + " s")
    print("| partition | ok ops/s before | ok ops/s during | ok ops/s after "
          "| ok sends/s before | ok sends/s during | ok sends/s after |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for key in sorted(counts):
        c, s = counts[key], sends[key]
        rates = [x / secs[i % 3] for i, x in enumerate(c + s)]
        print(f"| {key} | " + " | ".join(f"{r:.1f}" for r in rates) + " |")
    print()
    print("acknowledged sends during the fault, by partition and answering node:")
    for key in sorted(by_node):
        nodes = ", ".join(f"{n}: {c}" for n, c in sorted(by_node[key].items()))
        print(f"  {key}: {nodes}")


if __name__ == "__main__":
    main()
