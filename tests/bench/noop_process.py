"""The no-op Python handler of tests/bench/process.sh, as a process
handler: noop_async a coroutine, noop_sync a plain function (a thread).
BENCH_KIND names the coroutine's kind instead (tests/bench/peers.sh)."""
import os

from pgjobd_handler import Handler

handler = Handler()


@handler.kind(os.environ.get("BENCH_KIND", "noop_async"))
async def noop_async(job):
    return None


@handler.kind("noop_sync")
def noop_sync(job):
    return None


handler.run()
