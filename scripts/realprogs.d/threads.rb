# threads.rb - Ruby threads: 32 on a Queue with a Mutex and sleeps, a thread
# reading a pipe, IO.popen; prints the same line on every run.
# scripts/realprogs.sh case ruby-threads.
require 'digest'
q = Queue.new; 2000.times { |i| q << i }; q.close
m = Mutex.new; sum = 0
ts = 32.times.map { Thread.new { while (i = q.pop); d = Digest::MD5.hexdigest("w#{i}"); m.synchronize { sum += i }; sleep 0.001 if i % 100 == 0; end } }
ts.each(&:join)
r, w = IO.pipe; t = Thread.new { r.read }; sleep 0.1; w.write("x" * 100000); w.close
out = IO.popen(["sh", "-c", "echo sub; exit 3"]) { |io| io.read }
puts "ruby threads 32 sum #{sum} pipe #{t.value.size} popen #{out.strip} #{$?.exitstatus}"
