// pgjobd's no-op process handler in Node for tests/bench/incumbents.sh
// (clients/node): "." or its start latency to $BENCH_FIFO.
"use strict";
// Unix time in seconds, to the microsecond.
const now = () => (performance.timeOrigin + performance.now()) / 1000;
const fs = require("fs");
const { Handler } = require(process.env.PGJOBD_CLIENT);

const fifo = fs.openSync(process.env.BENCH_FIFO, "w");
const handler = new Handler();
handler.kind("noop_js", async (job) => {
  const t = job.payload.t;
  fs.writeSync(fifo, t === undefined ? "." : `L${Math.floor((now() - t) * 1e6)}\n`);
});
handler.run();
