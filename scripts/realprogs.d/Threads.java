// Threads.java - N Java threads (default 10,000) that each lock a shared
// monitor, sleep, wait on a latch and end; one thread overflows its stack
// (StackOverflowError: HotSpot's guard pages on the thread's stack) and
// one takes a NullPointerException in compiled code (an implicit null
// check: SIGSEGV in the JIT's code).  Prints a line that is the same on
// every run.  scripts/realprogs.sh case java-threads.
import java.util.concurrent.CountDownLatch;

public class Threads {
	static long total;
	static int depth;

	static void recurse() { depth++; recurse(); }

	static int len(String s) { return s.length(); }

	public static void main(String[] a) throws Exception {
		int n = a.length > 0 ? Integer.parseInt(a[0]) : 10000;
		CountDownLatch go = new CountDownLatch(1);
		Thread[] t = new Thread[n];
		for (int i = 0; i < n; i++) {
			final int k = i;
			t[i] = new Thread(() -> {
				try {
					go.await();
					Thread.sleep(k % 20);
				} catch (InterruptedException e) {
					throw new RuntimeException(e);
				}
				synchronized (Threads.class) { total += k; }
			});
			t[i].start();
		}
		go.countDown();
		for (Thread x : t) x.join();
		String soe = "none";
		Thread o = new Thread(() -> { try { recurse(); } catch (StackOverflowError e) { depth = -1; } });
		o.start();
		o.join();
		if (depth == -1) soe = "caught";
		int npe = 0;
		for (int i = 0; i < 200000; i++) {
			try { len(i % 1000 == 0 ? null : "x"); } catch (NullPointerException e) { npe++; }
		}
		System.out.println("threads " + n + " total " + total + " stackoverflow " + soe + " npe " + npe);
	}
}
