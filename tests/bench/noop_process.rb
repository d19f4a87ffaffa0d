# The no-op Ruby handler of tests/bench/process.sh, as a process handler
# (clients/ruby); BENCH_KIND names its kind instead (tests/bench/peers.sh).
require ENV.fetch("PGJOBD_CLIENT")

handler = PgjobdHandler::Handler.new
handler.kind(ENV.fetch("BENCH_KIND", "noop_rb")) { |_job| nil }
handler.run
