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
    this.timeoutMs = msg.timeout_ms;
    this.deadline = new Date(msg.deadline_ms || 0);
    this._abort = new AbortController();
    // Aborted when pgjobd cancels the job (its reason: signal.reason).
    this.signal = this._abort.signal;
  }

  get cancelled() {
    return this.signal.aborted;
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
  }

  // Registers fn (a function or an async function of the job) for kind.
  kind(name, fn) {
    this._kinds.set(name, fn);
    return this;
  }

  _send(msg) {
    // Synchronous writes, a line at a time: lines never interleave.
    let buf = Buffer.from(JSON.stringify(msg) + "\n");
    while (buf.length) {
      try {
        buf = buf.subarray(fs.writeSync(this._out, buf));
      } catch (e) {
        if (e.code !== "EAGAIN") throw e; // a full pipe: pgjobd reads it soon
      }
    }
  }

  async _run(job) {
    const fn = this._kinds.get(job.kind);
    const reply = { id: job.id };
    try {
      if (!fn) throw new Dead(`this program has no handler for kind ${job.kind}`);
      const result = await fn(job);
      reply.type = "done";
      reply.result = result === undefined ? null : result;
      JSON.stringify(reply); // not JSON: fails the attempt below
    } catch (e) {
      delete reply.result;
      if (e instanceof Snooze) {
        reply.type = "snooze";
        reply.in = e.seconds;
      } else if (e instanceof Retry) {
        reply.type = "failed";
        reply.error = wellFormed(e.message);
        if (e.seconds !== undefined) reply.retry_in = e.seconds;
      } else {
        reply.type = "failed";
        reply.error = wellFormed(job.cancelled ? `cancelled: ${job.signal.reason}` : errorText(e));
        if (e instanceof Dead) reply.dead = true;
      }
    }
    this._jobs.delete(job.id);
    this._send(reply);
  }

  _onMessage(msg) {
    if (msg.type === "job") {
      const job = new Job(this, msg);
      this._jobs.set(job.id, job);
      this._run(job);
    } else if (msg.type === "cancel") {
      const job = this._jobs.get(msg.id);
      if (job) job._abort.abort(msg.reason || "cancelled");
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
    const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
    const stop = () => {
      rl.close();
      const wait = () => (this._jobs.size ? setTimeout(wait, 10) : process.exit(0));
      wait();
    };
    rl.on("line", (line) => {
      if (line.length && !this._onMessage(JSON.parse(line))) stop();
    });
    rl.on("close", stop);
  }
}

module.exports = { Handler, Job, Retry, Dead, Snooze, PROTOCOL };
