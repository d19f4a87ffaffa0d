"""pgjobd_handler: write pgjobd process handlers in Python.

A program that pgjobd starts once and keeps (a handler of type `process`,
docs/handlers.md), which then runs many jobs, several at a time, instead of
one interpreter per job.  It speaks protocol 1: newline-delimited JSON on
its standard input and output.  Standard library only.

    from pgjobd_handler import Handler, Snooze

    handler = Handler()

    @handler.kind("resize")
    def resize(job):                 # a plain function runs in a thread
        return {"size": job.payload["size"]}

    @handler.kind("fetch")
    async def fetch(job):            # a coroutine runs on the event loop
        await asyncio.sleep(1)
        job.progress(0.5)
        raise Snooze(60)             # again in a minute

    handler.run()

What a function returns is the job's result (anything json.dumps takes);
an exception fails the attempt with its message and traceback (retried as
the handler's policy says), Retry sets the delay, Dead ends the job for
good, Snooze puts it back for later.  print() goes to stderr, which pgjobd
logs: the protocol keeps the real standard output to itself.
"""

import asyncio
import concurrent.futures
import inspect
import json
import os
import sys
import threading
import traceback

PROTOCOL = 1


class Retry(Exception):
    """Fails the attempt; the job runs again after `seconds` (None: the
    handler's backoff decides)."""

    def __init__(self, message="retry", seconds=None):
        super().__init__(message)
        self.seconds = seconds


class Dead(Exception):
    """Fails the job for good: no more attempts."""


class Snooze(Exception):
    """Puts the job back; it runs again in `seconds`."""

    def __init__(self, seconds):
        super().__init__("snooze %s s" % seconds)
        self.seconds = seconds


class Job:
    """One job as pgjobd sent it."""

    def __init__(self, handler, msg):
        self._handler = handler
        self.id = msg["id"]
        self.kind = msg["kind"]
        self.queue = msg.get("queue")
        self.attempt = msg["attempt"]
        self.max_attempts = msg.get("max_attempts")
        self.payload = msg["payload"]
        # Seconds it has before its timeout, and that moment (Unix time).
        self.timeout = msg.get("timeout_ms", 0) / 1000.0
        self.deadline = msg.get("deadline_ms", 0) / 1000.0
        self.cancel_reason = None
        self._task = None

    @property
    def cancelled(self):
        """True once pgjobd asked to stop it (a timeout, `pgjob cancel`, a
        shutdown).  A coroutine is cancelled (CancelledError); a function in
        a thread should look at this and return."""
        return self.cancel_reason is not None

    def progress(self, value=None):
        """Reports progress (any JSON value); pgjobd logs it."""
        self._handler._send_any({"type": "progress", "id": self.id,
                                 "progress": value})


def _text(s):
    # Lone surrogates (from undecodable file names, say) would make a line
    # that is not valid JSON for pgjobd.
    return str(s).encode("utf-8", "replace").decode("utf-8")


def _error_text(e):
    head = "%s: %s" % (type(e).__name__, e)
    tb = "".join(traceback.format_exception(type(e), e, e.__traceback__))
    return _text(head + "\n\n" + tb)


class Handler:
    """The program's handlers by kind, and the loop that runs them."""

    def __init__(self):
        self._kinds = {}
        self._jobs = {}
        self._loop = None
        self._loop_thread = None
        self._out_fd = None
        self._pool = None

    def kind(self, name):
        """Decorator: registers a function or coroutine for kind name."""
        def register(fn):
            self._kinds[name] = fn
            return fn
        return register

    def register(self, name, fn):
        self._kinds[name] = fn

    # --- writing -------------------------------------------------------

    def _send(self, msg):
        # allow_nan=False: NaN and Infinity are not JSON.
        data = (json.dumps(msg, separators=(",", ":"), allow_nan=False)
                + "\n").encode()
        view = memoryview(data)
        while view:
            n = os.write(self._out_fd, view)
            view = view[n:]

    def _send_any(self, msg):
        """From the loop or from a handler's thread."""
        if threading.get_ident() == self._loop_thread:
            self._send(msg)
        else:
            self._loop.call_soon_threadsafe(self._send, msg)

    # --- running a job -------------------------------------------------

    async def _run(self, job):
        fn = self._kinds.get(job.kind)
        reply = {"id": job.id}
        try:
            if fn is None:
                raise Dead("this program has no handler for kind %s"
                           % job.kind)
            if inspect.iscoroutinefunction(fn):
                result = await fn(job)
            else:
                result = await self._loop.run_in_executor(self._pool, fn, job)
            # Not JSON (an object, NaN): fails the attempt below.
            json.dumps(result, allow_nan=False)
            reply.update(type="done", result=result)
        except Snooze as e:
            reply.update({"type": "snooze", "in": e.seconds})
        except Retry as e:
            reply.update(type="failed", error=_text(e), retry_in=e.seconds)
        except Dead as e:
            reply.update(type="failed", error=_error_text(e), dead=True)
        except asyncio.CancelledError:
            reply.update(type="failed",
                         error="cancelled: %s" % job.cancel_reason)
        except Exception as e:  # noqa: BLE001 - any failure fails the job
            reply.update(type="failed", error=_error_text(e))
        finally:
            self._jobs.pop(job.id, None)
        self._send(reply)

    def _on_message(self, msg):
        t = msg.get("type")
        if t == "job":
            job = Job(self, msg)
            self._jobs[job.id] = job
            job._task = asyncio.ensure_future(self._run(job))
        elif t == "cancel":
            job = self._jobs.get(msg.get("id"))
            if job is None:
                return True  # it has just ended
            job.cancel_reason = msg.get("reason") or "cancelled"
            if inspect.iscoroutinefunction(self._kinds.get(job.kind)):
                job._task.cancel()
        elif t == "shutdown":
            return False
        return True

    async def _main(self):
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        workers = int(os.environ.get("PGJOB_CONCURRENCY", "4"))
        self._pool = concurrent.futures.ThreadPoolExecutor(max(workers, 1))
        reader = asyncio.StreamReader(limit=1 << 30)
        await self._loop.connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
        self._send({"type": "hello", "protocol": PROTOCOL,
                    "kinds": sorted(self._kinds)})
        while True:
            line = await reader.readline()
            if not line:
                break  # pgjobd closed our stdin: as a shutdown
            if not self._on_message(json.loads(line)):
                break
        # pgjobd sends shutdown only once it holds no job of ours; after
        # an end of input, jobs still running finish first.
        pending = [j._task for j in self._jobs.values()]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self._pool.shutdown(wait=False)

    def run(self):
        """Runs until pgjobd says shut down (or closes our input)."""
        # The protocol owns the real stdout; print() goes to stderr.
        self._out_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        asyncio.run(self._main())
