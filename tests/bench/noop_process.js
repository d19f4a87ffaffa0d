// The no-op Node handler of tests/bench/process.sh, as a process handler
// (clients/node); BENCH_KIND names its kind instead (tests/bench/peers.sh).
"use strict";
const { Handler } = require(process.env.PGJOBD_CLIENT);

const handler = new Handler();
handler.kind(process.env.BENCH_KIND || "noop_js", async () => null);
handler.run();
