# The no-op Ruby handler of tests/bench/process.sh, as a process handler
# (clients/ruby).
require ENV.fetch("PGJOBD_CLIENT")

handler = PgjobdHandler::Handler.new
handler.kind("noop_rb") { |_job| nil }
handler.run
