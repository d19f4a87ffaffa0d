// The no-op Node handler of tests/bench/process.sh, as a process handler
// (clients/node).
"use strict";
const { Handler } = require(process.env.PGJOBD_CLIENT);

const handler = new Handler();
handler.kind("noop_js", async () => null);
handler.run();
