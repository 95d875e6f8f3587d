#!/usr/bin/env python3
"""The figures docs/detection.md puts beside a `tidewater detect` table's rates, counted
from the table's JSON (`--out FILE.md` writes FILE.json beside it) and each run's own
history.jsonl, so they can be checked against the raw histories.

    python3 scripts/detect_compare.py TABLE.json [TABLE.json ...]

Per bug (row), over the runs that reached a verdict: catches; catches by the history alone
(an invalidating anomaly other than replica-divergence); the median first anomaly; over the
catching runs the median of the acknowledged writes lost and of the invalidating anomalies'
counts added up; over all runs the median of the acknowledged sends to t0/0 (counted from
history.jsonl: every micro-op of an ok send) and their median share of all acknowledged sends.
"""
import collections
import json
import os
import statistics
import sys


def acknowledged(run_dir):
    """(acknowledged sends to t0/0, acknowledged sends in all) of one run's history."""
    t0 = total = 0
    with open(os.path.join(run_dir, "history.jsonl")) as history:
        for line in history:
            op = json.loads(line)
            if op.get("f") == "send" and op.get("type") == "ok":
                for micro in op["value"]:
                    total += 1
                    t0 += micro[1] == "t0/0"
    return t0, total


def median(values, digits=1):
    return round(statistics.median(values), digits) if values else "-"


def report(path):
    rows = collections.defaultdict(list)
    with open(path) as table:
        for key, cell in json.load(table)["results"]:
            rows[key["bug"]].append(cell)
    print(f"== {path}")
    print("bug | caught | by the history alone | first anomaly s | lost | invalidating anomalies | t0/0 acknowledged | t0/0 share")
    for bug, cells in rows.items():
        checked = [c for c in cells if c.get("outcome") == "checked"]
        caught = [c for c in checked if c["valid"] == "invalid"]
        alone = [c for c in caught if any(a != "replica-divergence" for a in c["anomalies"])]
        firsts = [c["first_anomaly_s"] for c in caught if c.get("first_anomaly_s") is not None]
        lost = [c.get("lost") or 0 for c in caught]
        anomalies = [sum(c["anomalies"].values()) for c in caught]
        acks = [acknowledged(c["run_dir"]) for c in checked]
        shares = [t0 / total for t0, total in acks if total]
        print(
            f"{bug} | {len(caught)}/{len(checked)} | {len(alone)} | {median(firsts)} | "
            f"{median(lost)} | {median(anomalies)} | {median([a[0] for a in acks])} | "
            f"{median(shares, 2)}"
        )


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for table_path in sys.argv[1:]:
        report(table_path)
