"""pgjobd's no-op process handler in Python for tests/bench/incumbents.sh
(clients/python): "." or its start latency to $BENCH_FIFO, as the
incumbents' tasks do."""
import os
import time

from pgjobd_handler import Handler

handler = Handler()
fifo = os.open(os.environ["BENCH_FIFO"], os.O_WRONLY)


@handler.kind("noop_py")
async def noop(job):
    t = job.payload.get("t")
    os.write(fifo, b"." if t is None else b"L%d\n" % int((time.time() - t) * 1e6))


handler.run()
