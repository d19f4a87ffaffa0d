// pgjobd-handler: write pgjobd process handlers in Node.js (protocol 1,
// docs/handlers.md "process").  Node's standard library only.
//
//   const { Handler, Snooze } = require("./pgjobd-handler");
//   const handler = new Handler();
//   handler.kind("resize", async (job) => ({ width: job.payload.size }));
//   handler.run();
//
// A handler's return value (or its promise's) is the job's result; a throw
// fails the attempt with the error's message and stack; Retry, Dead and
// Snooze ask for the other answers.  Jobs run concurrently.  console.log
// goes to stderr, which pgjobd logs: stdout belongs to the protocol.
"use strict";

const readline = require("readline");
const fs = require("fs");

const PROTOCOL = 1;

// Fails the attempt; the job runs again after `seconds` (undefined: the
// handler's backoff decides).
class Retry extends Error {
  constructor(message, seconds) {
    super(message || "retry");
    this.seconds = seconds;
  }
}

// Fails the job for good.
class Dead extends Error {}

// Puts the job back; it runs again in `seconds`.
class Snooze extends Error {
  constructor(seconds) {
    super(`snooze ${seconds} s`);
    this.seconds = seconds;
  }
}

class Job {
  constructor(handler, msg) {
    this._handler = handler;
    this.id = msg.id;
    this.kind = msg.kind;
    this.queue = msg.queue;
    this.attempt = msg.attempt;
    this.maxAttempts = msg.max_attempts;
    this.payload = msg.payload;
    // The attempt's W3C traceparent (its span as the parent), or null.
    this.traceparent = msg.traceparent || null;
    this.timeoutMs = msg.timeout_ms;
    this.deadline = new Date(msg.deadline_ms || 0);
    this._abort = null; // made when first asked for: most jobs never are
    this._reason = undefined;
  }

  // Aborted when pgjobd cancels the job (its reason: signal.reason).
  get signal() {
    if (!this._abort) {
      this._abort = new AbortController();
      if (this._reason !== undefined) this._abort.abort(this._reason);
    }
    return this._abort.signal;
  }

  get cancelled() {
    return this._reason !== undefined;
  }

  _cancel(reason) {
    if (this._reason !== undefined) return;
    this._reason = reason;
    if (this._abort) this._abort.abort(reason);
  }

  // Reports progress (any JSON value); pgjobd logs it.
  progress(value) {
    this._handler._send({ type: "progress", id: this.id, progress: value ?? null });
  }
}

// Lone surrogates would make a line that is not valid JSON for pgjobd.
function wellFormed(s) {
  s = String(s);
  return typeof s.toWellFormed === "function" ? s.toWellFormed() : s;
}

function errorText(e) {
  if (e instanceof Error) {
    const head = `${e.name}: ${e.message}`;
    return e.stack && e.stack.startsWith(head) ? e.stack : `${head}\n\n${e.stack || ""}`;
  }
  return String(e);
}

class Handler {
  constructor() {
    this._kinds = new Map();
    this._jobs = new Map();
    this._out = 1; // the protocol's descriptor: stdout
    this._pending = [];
    this._flushBound = () => this._flush();
  }

  // Registers fn (a function or an async function of the job) for kind.
  kind(name, fn) {
    this._kinds.set(name, fn);
    return this;
  }

  _send(msg) {
    this._sendLine(JSON.stringify(msg) + "\n");
  }

  // Lines wait here and go out together, in one write, once the current
  // batch of messages has been handled.
  _sendLine(line) {
    this._pending.push(line);
    if (this._pending.length === 1) setImmediate(this._flushBound);
  }

  _flush() {
    if (!this._pending.length) return;
    let buf = Buffer.from(this._pending.join(""));
    this._pending.length = 0;
    while (buf.length) {
      try {
        buf = buf.subarray(fs.writeSync(this._out, buf));
      } catch (e) {
        if (e.code !== "EAGAIN") throw e; // a full pipe: pgjobd reads it soon
      }
    }
  }

  _run(job) {
    const fn = this._kinds.get(job.kind);
    let result;
    try {
      if (!fn) throw new Dead(`this program has no handler for kind ${job.kind}`);
      result = fn(job);
    } catch (e) {
      this._failed(job, e);
      return;
    }
    // A plain value is answered at once; a promise when it settles.
    if (result !== null && typeof result === "object" && typeof result.then === "function")
      result.then((r) => this._done(job, r), (e) => this._failed(job, e));
    else this._done(job, result);
  }

  _done(job, result) {
    this._jobs.delete(job.id);
    if (result === undefined || result === null) {
      this._sendLine(`{"id":${job.id},"type":"done","result":null}\n`);
      return;
    }
    let line;
    try {
      line = JSON.stringify({ id: job.id, type: "done", result });
    } catch (e) {
      this._failed(job, e); // not JSON: fails the attempt
      return;
    }
    this._sendLine(line + "\n");
  }

  _failed(job, e) {
    this._jobs.delete(job.id);
    const reply = { id: job.id };
    if (e instanceof Snooze) {
      reply.type = "snooze";
      reply.in = e.seconds;
    } else if (e instanceof Retry) {
      reply.type = "failed";
      reply.error = wellFormed(e.message);
      if (e.seconds !== undefined) reply.retry_in = e.seconds;
    } else {
      reply.type = "failed";
      reply.error = wellFormed(job.cancelled ? `cancelled: ${job._reason}` : errorText(e));
      if (e instanceof Dead) reply.dead = true;
    }
    this._send(reply);
  }

  _onMessage(msg) {
    if (msg.type === "job") {
      const job = new Job(this, msg);
      this._jobs.set(job.id, job);
      this._run(job);
    } else if (msg.type === "cancel") {
      const job = this._jobs.get(msg.id);
      if (job) job._cancel(msg.reason || "cancelled");
    } else if (msg.type === "shutdown") {
      return false;
    }
    return true;
  }

  // Runs until pgjobd says shut down (or closes stdin).
  run() {
    console.log = console.error;
    console.info = console.error;
    this._send({ type: "hello", protocol: PROTOCOL, kinds: [...this._kinds.keys()].sort() });
    this._flush();
    let stopped = false;
    const stop = () => {
      if (stopped) return;
      stopped = true;
      process.stdin.pause();
      const wait = () => {
        if (this._jobs.size) return setTimeout(wait, 10);
        this._flush();
        process.exit(0);
      };
      wait();
    };
    // Many lines a read: each chunk is split here, the partial last line
    // kept for the next.
    let rest = "";
    process.stdin.setEncoding("utf8");
    process.stdin.on("data", (chunk) => {
      if (stopped) return;
      const lines = (rest + chunk).split("\n");
      rest = lines.pop();
      for (const line of lines) {
        if (line.length && !this._onMessage(JSON.parse(line))) return stop();
      }
    });
    process.stdin.on("end", stop);
  }
}

module.exports = { Handler, Job, Retry, Dead, Snooze, PROTOCOL };
