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
import inspect
import json
import os
import queue
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
        # The attempt's W3C traceparent (its span as the parent), or None.
        self.traceparent = msg.get("traceparent")
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
        self._coro = {}  # kind: its function is a coroutine function
        self._inline = {}  # kind: a plain function run on the loop
        self._jobs = {}
        self._loop = None
        self._loop_thread = None
        self._out_fd = None
        self._queue = None  # jobs for the plain functions' threads
        self._threads = []
        # Replies wait here and go out together once per turn of the
        # loop: one write for all the answers of a batch.
        self._out = []
        self._out_lock = threading.Lock()
        self._flush_due = False
        self._done = None  # set by shutdown or the end of our input
        self._drained = None
        self._stopping = False

    def kind(self, name, inline=False):
        """Decorator: registers a function or coroutine for kind name.
        inline=True runs a plain function on the client's loop instead of
        in a thread: no hand-off, for functions that return at once (while
        one runs, no other job of this copy does, and a cancel is read
        only after it returns)."""
        def register(fn):
            self.register(name, fn, inline=inline)
            return fn
        return register

    def register(self, name, fn, inline=False):
        self._kinds[name] = fn
        self._coro[name] = inspect.iscoroutinefunction(fn)
        self._inline[name] = bool(inline)

    # --- writing -------------------------------------------------------

    def _write(self, data):
        view = memoryview(data)
        while view:
            n = os.write(self._out_fd, view)
            view = view[n:]

    def _flush(self):
        with self._out_lock:
            data = b"".join(self._out)
            self._out.clear()
            self._flush_due = False
        if data:
            self._write(data)

    def _send_line(self, line):
        """Queues one encoded line; from the loop or a handler's thread."""
        with self._out_lock:
            self._out.append(line)
            if self._flush_due:
                return
            self._flush_due = True
        if threading.get_ident() == self._loop_thread:
            self._loop.call_soon(self._flush)
        else:
            self._loop.call_soon_threadsafe(self._flush)

    def _send(self, msg):
        # allow_nan=False: NaN and Infinity are not JSON.
        self._send_line((json.dumps(msg, separators=(",", ":"),
                                    allow_nan=False) + "\n").encode())

    _send_any = _send

    # --- running a job -------------------------------------------------

    def _answer(self, job, result=None, exc=None, cancelled=False):
        """The job's one answer line; from the loop or a thread."""
        self._jobs.pop(job.id, None)
        if cancelled:
            reply = {"id": job.id, "type": "failed",
                     "error": "cancelled: %s" % job.cancel_reason}
        elif exc is None and result is None:
            line = b'{"id":%d,"type":"done","result":null}\n' % job.id
            reply = None
        elif exc is None:
            reply = {"id": job.id, "type": "done", "result": result}
        elif isinstance(exc, Snooze):
            reply = {"id": job.id, "type": "snooze", "in": exc.seconds}
        elif isinstance(exc, Retry):
            reply = {"id": job.id, "type": "failed", "error": _text(exc),
                     "retry_in": exc.seconds}
        elif isinstance(exc, Dead):
            reply = {"id": job.id, "type": "failed",
                     "error": _error_text(exc), "dead": True}
        elif isinstance(exc, asyncio.CancelledError):
            reply = {"id": job.id, "type": "failed",
                     "error": "cancelled: %s" % job.cancel_reason}
        else:
            reply = {"id": job.id, "type": "failed",
                     "error": _error_text(exc)}
        if reply is not None:
            try:
                line = (json.dumps(reply, separators=(",", ":"),
                                   allow_nan=False) + "\n").encode()
            except (TypeError, ValueError) as e:
                # Not JSON (an object, NaN): fails the attempt.
                line = (json.dumps({"id": job.id, "type": "failed",
                                    "error": _error_text(e)},
                                   separators=(",", ":")) + "\n").encode()
        self._send_line(line)
        if self._stopping and not self._jobs:
            if threading.get_ident() == self._loop_thread:
                self._drained.set()
            else:
                self._loop.call_soon_threadsafe(self._drained.set)

    def _call(self, fn, job):
        try:
            result = fn(job)
        # Any failure fails the job; SystemExit too, which would otherwise
        # end a thread of the pool with the job unanswered.
        except BaseException as e:  # noqa: BLE001
            self._answer(job, exc=e)
        else:
            self._answer(job, result)

    def _thread_main(self):
        get = self._queue.get
        while True:
            item = get()
            if item is None:
                return
            self._call(*item)

    def _task_done(self, job, task):
        if task.cancelled():
            self._answer(job, cancelled=True)
            return
        e = task.exception()
        if e is None:
            self._answer(job, task.result())
        else:
            self._answer(job, exc=e)

    def _start(self, job):
        kind = job.kind
        fn = self._kinds.get(kind)
        if fn is None:
            self._answer(job, exc=Dead("this program has no handler for "
                                       "kind %s" % kind))
        elif self._coro[kind]:
            task = self._loop.create_task(fn(job))
            job._task = task
            task.add_done_callback(lambda t: self._task_done(job, t))
        elif self._inline[kind]:
            self._call(fn, job)
        else:
            self._queue.put((fn, job))

    def _on_message(self, msg):
        t = msg.get("type")
        if t == "job":
            job = Job(self, msg)
            self._jobs[job.id] = job
            self._start(job)
        elif t == "cancel":
            job = self._jobs.get(msg.get("id"))
            if job is None:
                return True  # it has just ended
            job.cancel_reason = msg.get("reason") or "cancelled"
            if job._task is not None:
                job._task.cancel()
        elif t == "shutdown":
            return False
        return True

    def _on_data(self, lines):
        for line in lines:
            if self._done.done():
                return
            if line.strip() and not self._on_message(json.loads(line)):
                self._done.set_result(None)

    async def _main(self):
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self._done = self._loop.create_future()
        self._drained = asyncio.Event()
        if any(not self._coro[k] and not self._inline[k]
               for k in self._kinds):
            workers = max(int(os.environ.get("PGJOB_CONCURRENCY", "4")), 1)
            self._queue = queue.SimpleQueue()
            for _ in range(workers):
                t = threading.Thread(target=self._thread_main, daemon=True)
                t.start()
                self._threads.append(t)
        await self._loop.connect_read_pipe(lambda: _Reader(self), sys.stdin)
        self._write((json.dumps({"type": "hello", "protocol": PROTOCOL,
                                 "kinds": sorted(self._kinds)})
                     + "\n").encode())
        await self._done
        # pgjobd sends shutdown only once it holds no job of ours; after
        # an end of input, jobs still running finish first.
        self._stopping = True
        if self._jobs:
            await self._drained.wait()
        self._flush()
        for _ in self._threads:
            self._queue.put(None)

    def run(self):
        """Runs until pgjobd says shut down (or closes our input)."""
        # The protocol owns the real stdout; print() goes to stderr.
        self._out_fd = os.dup(1)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        asyncio.run(self._main())


class _Reader(asyncio.Protocol):
    """pgjobd's lines, as many as each read brings."""

    def __init__(self, handler):
        self._handler = handler
        self._rest = b""

    def data_received(self, data):
        if self._rest:
            data = self._rest + data
        lines = data.split(b"\n")
        self._rest = lines.pop()
        if lines:
            self._handler._on_data(lines)

    def eof_received(self):
        self.connection_lost(None)

    def connection_lost(self, exc):
        done = self._handler._done
        if not done.done():
            done.set_result(None)  # pgjobd closed our stdin: a shutdown
