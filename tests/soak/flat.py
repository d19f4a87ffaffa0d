#!/usr/bin/env python3
"""The end of a soak (tests/soak/soak.sh): whether each figure of its
reports stayed flat.

  flat.py REPORT REPORT_EVERY_S RETENTION

Each figure of the last report is compared with the first report taken
once the tables could have reached their size (finished jobs kept for
RETENTION, pruned every minute): flat when within 10 % of it.  Every
figure is printed with its first and last value, its range, and the
verdict; the exit status is 0 either way (the verdicts are the report).
"""
import re
import sys

FIGS = ["jobs_s", "fed_s", "backlog", "claim_p99_ms", "wake_p99_ms", "table_mb", "index_mb",
        "dead_tuples", "sup_rss_kb", "sup_fds", "worker_rss_kb", "worker_fds"]


def main():
    path, every, retention = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    ret_s = int(retention.rstrip("s"))
    reps = []
    for line in open(path):
        m = re.match(r"t=(\d+)m (.*)", line)
        if not m:
            continue
        kv = dict(x.split("=", 1) for x in m.group(2).split())
        reps.append((int(m.group(1)) * 60, kv))
    if len(reps) < 2:
        print("flat: fewer than two reports, nothing to compare")
        return 0
    warm = [r for r in reps if r[0] >= ret_s + 60] or reps[1:]
    if len(warm) < 2:
        warm = reps[-2:]
    first, last = warm[0], warm[-1]
    flat_all = True
    out = []
    for f in FIGS:
        vals = [float(r[1][f]) for r in warm if f in r[1] and r[1][f] not in ("-", "-1")]
        if len(vals) < 2:
            out.append(f"{f}=n/a")
            continue
        a, b = vals[0], vals[-1]
        ok = abs(b - a) <= 0.10 * abs(a) if a else b == 0
        flat_all &= ok
        out.append(f"{f}={a:g}->{b:g}[{min(vals):g}..{max(vals):g}]{'flat' if ok else 'NOT_FLAT'}")
    print(f"flat: from t={first[0] // 60}m to t={last[0] // 60}m: " + " ".join(out))
    print(f"flat: {'every figure within 10 %' if flat_all else 'some figures moved by more than 10 % (NOT_FLAT above)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
