#!/usr/bin/env python3
"""The end of a soak (tests/soak/soak.sh): whether each figure of its
reports stayed flat.

  flat.py REPORT REPORT_EVERY_S RETENTION

The reports counted are those taken once the tables could have reached
their size (finished jobs kept for RETENTION, pruned every minute).  Each
figure's level at the start is the median of the first third of them, at
the end the median of the last third (with fewer than six reports, the
first and the last one): a fault lands in some intervals and not others
(a PostgreSQL restart every ninth fault), so one interval against another
says which faults each held, where thirds of a long run each hold every
kind of fault and say whether the figure grew.  Flat when the end is
within 10 % of the start; the backlog, a second's burst of jobs in
flight, also when within one second's load of it.  A figure that moved
further the way that is better (throughput up; latency, backlog, sizes,
dead tuples, memory and descriptors down) is "better", not NOT_FLAT: a
soak looks for what wears a system down, and a p99 that falls when the
machine's other work stops, or dead tuples that autovacuum happened to
have just removed, are neither a leak nor a slowdown.  Every figure is
printed with its first and last level, its range, and the verdict; the
exit status is 0 either way (the verdicts are the report).
"""
import re
import sys
from statistics import median

# The figures where more is better; for every other one, less is.
MORE_IS_BETTER = {"jobs_s", "fed_s"}
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
    load = 0.0
    for line in open(path):
        m = re.match(r"soak: .* load (\d+) jobs/s", line)
        if m:
            load = float(m.group(1))
    third = len(warm) // 3 if len(warm) >= 6 else 1
    first, last = warm[0], warm[-1]
    flat_all = True
    out = []
    for f in FIGS:
        vals = [float(r[1][f]) for r in warm if f in r[1] and r[1][f] not in ("-", "-1")]
        if len(vals) < 2:
            out.append(f"{f}=n/a")
            continue
        a, b = median(vals[:third]), median(vals[-third:])
        slack = max(0.10 * abs(a), load if f == "backlog" else 0.0)
        ok = abs(b - a) <= slack if (a or slack) else b == 0
        better = not ok and (b > a) == (f in MORE_IS_BETTER)
        flat_all &= ok or better
        verdict = "flat" if ok else "better" if better else "NOT_FLAT"
        out.append(f"{f}={a:g}->{b:g}[{min(vals):g}..{max(vals):g}]{verdict}")
    how = f"medians of the first and last {third} reports" if third > 1 else "the first and last report"
    print(f"flat: from t={first[0] // 60}m to t={last[0] // 60}m, {how}: " + " ".join(out))
    print(f"flat: {'every figure within 10 % or better' if flat_all else 'some figures got worse by more than 10 % (NOT_FLAT above)'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
