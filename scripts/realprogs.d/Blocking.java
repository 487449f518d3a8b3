// Blocking.java - what a Java program does to threads blocked in the
// kernel: close a ServerSocket under a thread in accept and a Socket under
// one in read (the JDK dup2's a dead socket onto the fd and signals the
// thread), interrupt a SocketChannel read (ClosedByInterruptException), a
// sleep and a wait, wake a Selector, time out a read (SO_TIMEOUT), run
// processes from 8 threads.  Prints one line per check, the same on
// every run.  scripts/realprogs.sh case java-blocking.
import java.io.*;
import java.net.*;
import java.nio.ByteBuffer;
import java.nio.channels.*;
import java.util.concurrent.*;

public class Blocking {
	static String run(Callable<String> c) throws Exception {
		FutureTask<String> f = new FutureTask<>(c);
		Thread t = new Thread(f);
		t.start();
		return f.get(120, TimeUnit.SECONDS);
	}

	static String blocked(Callable<Object> body, Runnable unblock) throws Exception {
		CompletableFuture<String> r = new CompletableFuture<>();
		Thread t = new Thread(() -> {
			try { body.call(); r.complete("returned"); }
			catch (Throwable e) { r.complete(e.getClass().getSimpleName() + ": " + e.getMessage()); }
		});
		t.start();
		while (t.getState() == Thread.State.NEW || t.getState() == Thread.State.RUNNABLE && !r.isDone()) {
			Thread.sleep(300); // give it time to block (the outcome is the same either way)
			break;
		}
		unblock.run();
		t.join(120000);
		return r.getNow("still blocked");
	}

	public static void main(String[] a) throws Exception {
		ServerSocket ss = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
		System.out.println("accept closed: " + blocked(() -> ss.accept(), () -> { try { ss.close(); } catch (IOException e) { } }));

		ServerSocket ss2 = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
		Socket c = new Socket(InetAddress.getLoopbackAddress(), ss2.getLocalPort());
		Socket s = ss2.accept();
		System.out.println("read closed: " + blocked(() -> c.getInputStream().read(), () -> { try { c.close(); } catch (IOException e) { } }));
		s.close();

		ServerSocketChannel sc = ServerSocketChannel.open().bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0));
		SocketChannel ch = SocketChannel.open(sc.getLocalAddress());
		SocketChannel peer = sc.accept();
		Thread[] who = new Thread[1];
		System.out.println("channel read interrupted: " + blocked(() -> { who[0] = Thread.currentThread(); return ch.read(ByteBuffer.allocate(10)); },
			() -> who[0].interrupt()) + ", open " + ch.isOpen());
		peer.close();

		System.out.println("sleep interrupted: " + blocked(() -> { who[0] = Thread.currentThread(); Thread.sleep(600000); return null; }, () -> who[0].interrupt()));
		Object lock = new Object();
		System.out.println("wait interrupted: " + blocked(() -> { who[0] = Thread.currentThread(); synchronized (lock) { lock.wait(); } return null; }, () -> who[0].interrupt()));

		Selector sel = Selector.open();
		System.out.println("select woken: " + blocked(() -> sel.select(), () -> sel.wakeup()));

		Socket c3 = new Socket(InetAddress.getLoopbackAddress(), ss2.getLocalPort());
		Socket s3 = ss2.accept();
		c3.setSoTimeout(200);
		System.out.println("read timeout: " + run(() -> { try { c3.getInputStream().read(); return "returned"; } catch (SocketTimeoutException e) { return "SocketTimeoutException"; } }));
		c3.close(); s3.close();

		ExecutorService ex = Executors.newFixedThreadPool(8);
		java.util.List<Future<Integer>> fs = new java.util.ArrayList<>();
		for (int i = 0; i < 32; i++) {
			final int k = i;
			fs.add(ex.submit(() -> {
				Process p = new ProcessBuilder("sh", "-c", "read x; echo $x; exit " + (k % 5)).start();
				p.getOutputStream().write(("line" + k + "\n").getBytes());
				p.getOutputStream().close();
				String out = new String(p.getInputStream().readAllBytes()).trim();
				int st = p.waitFor();
				return out.equals("line" + k) ? st : -1;
			}));
		}
		int sum = 0;
		for (Future<Integer> f : fs) sum += f.get();
		ex.shutdown();
		System.out.println("processes: status sum " + sum);
	}
}
