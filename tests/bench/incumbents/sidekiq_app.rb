# Sidekiq 6 (Debian's ruby-sidekiq) on Redis, for tests/bench/incumbents.sh:
# the no-op job, and its enqueuers.
#
#   ruby sidekiq_app.rb enqueue N     N jobs (push_bulk), then exits
#   ruby sidekiq_app.rb lines         a job for each line read
#   sidekiq -r ./sidekiq_app.rb ...   (incumbents.sh's settings)
require "sidekiq"
require "redis"

# redis-rb 4.8 warns at every push that Sidekiq 6.4's sadd will change.
Redis.silence_deprecations = true if Redis.respond_to?(:silence_deprecations=)
redis = { path: ENV.fetch("BENCH_REDIS_SOCK") }
Sidekiq.configure_server { |c| c.redis = redis }
Sidekiq.configure_client { |c| c.redis = redis }
Sidekiq.logger.level = Logger::WARN

class Noop
  include Sidekiq::Worker

  FIFO_LOCK = Mutex.new

  def perform(t = nil)
    line = t ? "L#{((Time.now.to_f - t) * 1e6).to_i}\n" : "."
    FIFO_LOCK.synchronize do
      $bench_fifo ||= File.open(ENV.fetch("BENCH_FIFO"), "w").tap { |f| f.sync = true }
      $bench_fifo.write(line)
    end
  end
end

if __FILE__ == $PROGRAM_NAME
  if ARGV[0] == "enqueue"
    left = Integer(ARGV[1])
    while left.positive?
      k = [left, 1000].min
      Sidekiq::Client.push_bulk("class" => Noop, "args" => Array.new(k) { [] })
      left -= k
    end
  else
    Noop.perform_async(Time.now.to_f) while $stdin.gets
  end
end
