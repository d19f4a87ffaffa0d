"""The measuring side of tests/bench/incumbents.sh, the same for every
system: each system's no-op handler writes "." to the FIFO $BENCH_FIFO
after a job of the drain, and "L<microseconds>\\n" (from the time the job
was enqueued, its payload's t, to its start) for a job of the latency run.

  drive.py drain FIFO N PIDS TIMEOUT_S
      Times the drain from the first job to the Nth, and the CPU time that
      the processes named in the file PIDS used meanwhile (lines "label
      comm root_pid": root_pid and its descendants, those whose name is
      comm, or every one for "*", or every one but comm for "!comm"), so
      that start-up is not counted.  Prints "jobs_per_s label=us_per_job...".
  drive.py latency FIFO COUNT PAUSE_MS TIMEOUT_S -- ENQUEUER...
      Starts ENQUEUER, which enqueues one job (its payload's t the time)
      for each line it reads; sends COUNT lines, each after the previous
      job started and a pause (one more first, not counted); prints
      "p50_ms p99_ms".
"""
import os
import random
import subprocess
import sys
import time

HZ = os.sysconf("SC_CLK_TCK")


def procs():
    """pid: (comm, ppid, utime + stime in ticks)."""
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
        except OSError:
            continue
        comm = s[s.index("(") + 1:s.rindex(")")]
        rest = s[s.rindex(")") + 2:].split()
        out[int(d)] = (comm, int(rest[1]), int(rest[11]) + int(rest[12]))
    return out


def cpu(groups):
    """label: ticks used by the processes of that label alive now."""
    ps = procs()
    kids = {}
    for pid, (_, ppid, _) in ps.items():
        kids.setdefault(ppid, []).append(pid)
    used = {}
    for label, comm, root in groups:
        todo, t = [root], 0
        while todo:
            p = todo.pop()
            if p not in ps:
                continue
            todo.extend(kids.get(p, []))
            c = ps[p][0]
            if (comm == "*" or (comm.startswith("!") and c != comm[1:])
                    or c == comm):
                t += ps[p][2]
        used[label] = used.get(label, 0) + t
    return used


def read_groups(path):
    groups = []
    with open(path) as f:
        for line in f:
            if line.strip():
                label, comm, pid = line.split()
                groups.append((label, comm, int(pid)))
    return groups


def drain(fifo, n, pids, timeout):
    fd = os.open(fifo, os.O_RDWR)  # never an end of file meanwhile
    open(fifo + ".ready", "w").close()
    seen = 0
    deadline = time.monotonic() + timeout
    first = None
    while seen < n:
        if time.monotonic() > deadline:
            sys.exit("drive: %d of %d jobs after %d s" % (seen, n, timeout))
        data = os.read(fd, 1 << 16)
        if first is None:
            first = time.monotonic()
            while not os.path.exists(pids):
                time.sleep(0.01)
            groups = read_groups(pids)
            c0 = cpu(groups)
        seen += data.count(b".")
        if seen < n:
            time.sleep(0.002)  # a read per 2 ms, not per job
    last = time.monotonic()
    c1 = cpu(groups)
    s = max(last - first, 1e-3)
    print("%.0f" % (n / s) + "".join(
        " %s=%.1f" % (k, (c1[k] - c0.get(k, 0)) / HZ * 1e6 / n)
        for k in c1))


def latency(fifo, count, pause_ms, timeout, enqueuer):
    fd = os.open(fifo, os.O_RDWR)
    f = os.fdopen(fd, "rb", buffering=0)
    p = subprocess.Popen(enqueuer, stdin=subprocess.PIPE)
    buf = b""
    samples = []
    # One more job first, not counted: the enqueuer's connection made and
    # its code warm, as an application's would be.
    for i in range(-1, count):
        p.stdin.write(b"go\n")
        p.stdin.flush()
        deadline = time.monotonic() + timeout
        while b"\n" not in buf:
            if time.monotonic() > deadline:
                sys.exit("drive: job %d did not start in %d s" % (i, timeout))
            buf += os.read(fd, 4096)
        line, buf = buf.split(b"\n", 1)
        if i >= 0:
            samples.append(int(line.lstrip(b".L")) / 1000.0)
        # Pauses of 0.5 to 1.5 times PAUSE_MS: the queue is idle at each
        # enqueue, and no poll interval is hit in step.
        time.sleep(pause_ms / 1000.0 * (0.5 + random.random()))
    p.stdin.close()
    p.wait()
    samples.sort()
    pick = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    print("%.2f %.2f" % (pick(0.5), pick(0.99)))
    f.close()


if __name__ == "__main__":
    a = sys.argv
    if a[1] == "drain":
        drain(a[2], int(a[3]), a[4], int(a[5]))
    elif a[1] == "latency":
        latency(a[2], int(a[3]), float(a[4]), int(a[5]), a[a.index("--") + 1:])
