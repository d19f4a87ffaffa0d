# pgjobd_handler: write pgjobd process handlers in Ruby (protocol 1,
# docs/handlers.md "process").  Standard library only.
#
#   require_relative "pgjobd_handler"
#   handler = PgjobdHandler::Handler.new
#   handler.kind("resize") { |job| { "width" => job.payload["size"] } }
#   handler.run
#
# The block's value is the job's result; an exception fails the attempt
# with its message and backtrace; Retry, Dead and Snooze ask for the other
# answers.  Jobs run in PGJOB_CONCURRENCY threads.  puts goes to stderr,
# which pgjobd logs: stdout belongs to the protocol.
require "json"

module PgjobdHandler
  PROTOCOL = 1

  # Fails the attempt; the job runs again after seconds (nil: the
  # handler's backoff decides).
  class Retry < StandardError
    attr_reader :seconds

    def initialize(message = "retry", seconds = nil)
      super(message)
      @seconds = seconds
    end
  end

  # Fails the job for good.
  class Dead < StandardError; end

  # Puts the job back; it runs again in seconds.
  class Snooze < StandardError
    attr_reader :seconds

    def initialize(seconds)
      super("snooze #{seconds} s")
      @seconds = seconds
    end
  end

  class Job
    attr_reader :id, :kind, :queue, :attempt, :max_attempts, :payload,
                :timeout, :deadline, :cancel_reason, :traceparent

    def initialize(handler, msg)
      @handler = handler
      @id = msg.fetch("id")
      @kind = msg.fetch("kind")
      @queue = msg["queue"]
      @attempt = msg.fetch("attempt")
      @max_attempts = msg["max_attempts"]
      @payload = msg.fetch("payload")
      # The attempt's W3C traceparent (its span as the parent), or nil.
      @traceparent = msg["traceparent"]
      @timeout = msg.fetch("timeout_ms", 0) / 1000.0
      @deadline = Time.at(msg.fetch("deadline_ms", 0) / 1000.0)
      @cancel_reason = nil
    end

    # True once pgjobd asked to stop it: the block should return.
    def cancelled?
      !@cancel_reason.nil?
    end

    def cancel(reason)
      @cancel_reason = reason
    end

    # Reports progress (any JSON value); pgjobd logs it.
    def progress(value = nil)
      @handler.send_message("type" => "progress", "id" => @id,
                            "progress" => value)
    end
  end

  class Handler
    def initialize
      @kinds = {}
      @jobs = {}
      @lock = Mutex.new
      @out = nil
      @pending = +""
      @queue = Queue.new
      @write_lock = Mutex.new
      @wake = ConditionVariable.new
      @closing = false
    end

    # Registers the block for kind name.
    def kind(name, &block)
      @kinds[name] = block
      self
    end

    def send_message(msg)
      send_line(JSON.generate(msg) << "\n")
    end

    # Runs until pgjobd says shut down (or closes stdin).
    def run
      @out = $stdout.dup
      @out.sync = true
      $stdout.reopen($stderr)
      send_message("type" => "hello", "protocol" => PROTOCOL,
                   "kinds" => @kinds.keys.sort)
      flush
      # PGJOB_CONCURRENCY threads take the jobs in turn: several in flight,
      # no thread started per job.
      n = [ENV.fetch("PGJOB_CONCURRENCY", "4").to_i, 1].max
      threads = Array.new(n) do
        Thread.new do
          while (job = @queue.pop)
            run_job(job)
          end
        end
      end
      flusher = Thread.new { flush_later }
      read_messages
      @queue.close
      threads.each(&:join)
      @lock.synchronize do
        @closing = true
        @wake.signal
      end
      flusher.join
      flush
    end

    private

    # Reads what pgjobd wrote, as much as is there at once: the jobs of one
    # read are all in hand before any of them runs, so that their answers
    # go out together (answer) and pgjobd ends them in one statement; a
    # read of one line at a time let each job end alone.
    def read_messages
      $stdin.binmode
      pending = +""
      loop do
        begin
          pending << $stdin.readpartial(1 << 16)
        rescue EOFError
          return
        end
        lines = pending.split("\n", -1)
        pending = lines.pop
        jobs = []
        stop = false
        lines.each do |line|
          next if line.strip.empty?

          msg = JSON.parse(line.force_encoding(Encoding::UTF_8))
          case msg["type"]
          when "job"
            job = Job.new(self, msg)
            @lock.synchronize { @jobs[job.id] = job }
            jobs << job
          when "cancel"
            job = @lock.synchronize { @jobs[msg["id"]] }
            job&.cancel(msg["reason"] || "cancelled")
          when "shutdown"
            stop = true
            break
          end
        end
        jobs.each { |j| @queue << j }
        return if stop
      end
    end

    # A progress line goes out at once.
    def send_line(line)
      @lock.synchronize { @pending << line }
      flush
    end

    # A job's answer.  The answer of the last job in hand goes out at once,
    # with those that wait; others wait a moment for it (flush_later), so
    # that the answers of jobs sent together go out together, in one write,
    # and pgjobd ends them in one turn.
    def answer(id, line)
      last = @lock.synchronize do
        @jobs.delete(id)
        @pending << line
        @wake.signal unless @jobs.empty?
        @jobs.empty?
      end
      flush if last
    end

    # Writes the answers that wait, half a millisecond after the first of
    # them: a job still running does not hold back the others' answers.
    def flush_later
      loop do
        @lock.synchronize do
          @wake.wait(@lock) while @pending.empty? && !@closing
        end
        return if @closing

        sleep 0.0005
        flush
      end
    end

    def flush
      data = @lock.synchronize do
        d = @pending
        @pending = +""
        d
      end
      @write_lock.synchronize { @out.write(data) } unless data.empty?
    end

    # Valid UTF-8, so that JSON.generate takes it.
    def text(s)
      s.to_s.dup.force_encoding(Encoding::UTF_8).scrub("?")
    end

    def run_job(job)
      block = @kinds[job.kind]
      reply = { "id" => job.id }
      begin
        raise Dead, "this program has no handler for kind #{job.kind}" unless block

        result = block.call(job)
        line = if result.nil?
                 "{\"id\":#{job.id},\"type\":\"done\",\"result\":null}\n"
               else
                 # not JSON: fails the attempt below
                 JSON.generate(reply.merge!("type" => "done", "result" => result)) << "\n"
               end
      rescue Snooze => e
        reply.merge!("type" => "snooze", "in" => e.seconds)
      rescue Retry => e
        reply.merge!("type" => "failed", "error" => text(e.message),
                     "retry_in" => e.seconds)
      # Any exception, not only a StandardError: one that went through
      # would end this thread of the pool with the job unanswered.
      rescue Exception => e # rubocop:disable Lint/RescueException
        reply.delete("result")
        msg = "#{e.class}: #{e.message}\n\n#{(e.backtrace || []).join("\n")}"
        reply.merge!("type" => "failed", "error" => text(msg))
        reply["dead"] = true if e.is_a?(Dead)
      end
      answer(job.id, line || (JSON.generate(reply) << "\n"))
    end
  end
end
