// BullMQ (npm) on Redis, for tests/bench/incumbents.sh: the no-op worker and
// its enqueuers.  NODE_PATH points at the node_modules that
// scripts/bench-deps.sh installed under the build dir.
//
//   node bullmq.js enqueue N            N jobs (addBulk), then exits
//   node bullmq.js lines                a job for each line read
//   node bullmq.js worker CONCURRENCY   the worker
"use strict";
// Unix time in seconds, to the microsecond.
const now = () => (performance.timeOrigin + performance.now()) / 1000;
const fs = require("fs");
const readline = require("readline");
const { Queue, Worker } = require("bullmq");

const connection = { path: process.env.BENCH_REDIS_SOCK };
const name = "bench";
const [mode, arg] = process.argv.slice(2);

async function main() {
  if (mode === "worker") {
    const fifo = fs.openSync(process.env.BENCH_FIFO, "w");
    new Worker(
      name,
      async (job) => {
        const t = job.data.t;
        fs.writeSync(fifo, t === undefined ? "." : `L${Math.floor((now() - t) * 1e6)}\n`);
      },
      { connection, concurrency: Number(arg) },
    );
    return;
  }
  const queue = new Queue(name, { connection });
  if (mode === "enqueue") {
    for (let left = Number(arg); left > 0; left -= 1000) {
      const k = Math.min(left, 1000);
      await queue.addBulk(Array.from({ length: k }, () => ({ name: "noop", data: {} })));
    }
  } else {
    const rl = readline.createInterface({ input: process.stdin });
    for await (const _ of rl) await queue.add("noop", { t: now() });
  }
  await queue.close();
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
