# pgjobd's no-op process handler in Ruby for tests/bench/incumbents.sh
# (clients/ruby): "." or its start latency to $BENCH_FIFO.
require ENV.fetch("PGJOBD_CLIENT")

fifo = File.open(ENV.fetch("BENCH_FIFO"), "w")
fifo.sync = true
lock = Mutex.new
handler = PgjobdHandler::Handler.new
handler.kind("noop_rb") do |job|
  t = job.payload["t"]
  line = t ? "L#{((Time.now.to_f - t) * 1e6).to_i}\n" : "."
  lock.synchronize { fifo.write(line) }
  nil
end
handler.run
