"""Celery 5 (Debian's python3-celery) on Redis, for tests/bench/incumbents.sh:
the no-op task, and its enqueuers.

  python3 celery_app.py enqueue N     N jobs, then exits
  python3 celery_app.py lines         a job for each line read
  python3 -m celery -A celery_app worker ...   (incumbents.sh's settings)
"""
import os
import sys
import time

from celery import Celery

app = Celery("bench", broker="redis+socket://" + os.environ["BENCH_REDIS_SOCK"])
app.conf.update(
    task_default_queue="bench",
    task_ignore_result=True,  # no result backend: nothing stored per task
    worker_hijack_root_logger=False,
)
_fifo = None


def _out(data):
    global _fifo
    if _fifo is None:  # per process: the prefork pool's children
        _fifo = os.open(os.environ["BENCH_FIFO"], os.O_WRONLY)
    os.write(_fifo, data)


@app.task(name="noop")
def noop(t=None):
    if t is None:
        _out(b".")
    else:
        _out(b"L%d\n" % int((time.time() - t) * 1e6))


if __name__ == "__main__":
    if sys.argv[1] == "enqueue":
        for _ in range(int(sys.argv[2])):
            noop.apply_async()
    else:
        while sys.stdin.readline():
            noop.apply_async(args=(time.time(),))
