// Echo.java - a thread-per-connection echo server in Java (blocking
// java.net sockets, one Thread per accepted connection) and a client
// of N threads that each send M 64-byte messages and check every echo.
//   java Echo server PORT          prints "listening PORT" when it accepts
//                                  (PORT 0: a free one)
//   java Echo client PORT N M      prints "conns N msgs N*M bad 0"
// scripts/realprogs.sh case java-echo.
import java.io.*;
import java.net.*;
import java.util.concurrent.atomic.AtomicLong;

public class Echo {
	public static void main(String[] a) throws Exception {
		int port = Integer.parseInt(a[1]);
		if (a[0].equals("server")) {
			ServerSocket ss = new ServerSocket();
			ss.setReuseAddress(true);
			ss.bind(new InetSocketAddress("127.0.0.1", port), 4096);
			System.out.println("listening " + ss.getLocalPort());
			System.out.flush();
			for (;;) {
				Socket s = ss.accept();
				Thread t = new Thread(() -> {
					try (s) {
						InputStream in = s.getInputStream();
						OutputStream out = s.getOutputStream();
						byte[] b = new byte[4096];
						int r;
						while ((r = in.read(b)) > 0) out.write(b, 0, r);
					} catch (IOException e) { }
				});
				t.setDaemon(true);
				t.start();
			}
		}
		int n = Integer.parseInt(a[2]), m = Integer.parseInt(a[3]);
		AtomicLong msgs = new AtomicLong(), bad = new AtomicLong();
		Thread[] t = new Thread[n];
		long t0 = System.nanoTime();
		for (int i = 0; i < n; i++) {
			final int k = i;
			t[i] = new Thread(() -> {
				try (Socket s = new Socket("127.0.0.1", port)) {
					s.setTcpNoDelay(true);
					DataInputStream in = new DataInputStream(s.getInputStream());
					OutputStream out = s.getOutputStream();
					byte[] b = new byte[64], r = new byte[64];
					for (int j = 0; j < m; j++) {
						for (int x = 0; x < 64; x++) b[x] = (byte)(k * 31 + j * 7 + x);
						out.write(b);
						in.readFully(r);
						if (!java.util.Arrays.equals(b, r)) bad.incrementAndGet();
						msgs.incrementAndGet();
					}
				} catch (IOException e) { bad.incrementAndGet(); System.err.println(e); }
			});
			t[i].start();
		}
		for (Thread x : t) x.join();
		double secs = (System.nanoTime() - t0) / 1e9;
		System.out.println("conns " + n + " msgs " + msgs.get() + " bad " + bad.get());
		System.err.printf("echo: %.2f s, %.0f msgs/s%n", secs, msgs.get() / secs);
	}
}
