/*
 * test_hook_diff.c - regressions found by the differential hook fuzzer
 * (tests/fuzz/hookdiff.c, docs/reliability.md): each is the reduced
 * program on which a G under weft's hooks answered differently from a
 * plain thread on glibc.
 */
#include "test_hook.h"

#include <fcntl.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <sys/uio.h>

/* Finding 2: a read of 0 bytes returns 0 at once (read and readv; a
 * recv of 0 on an empty stream socket blocks in the kernel too).  After a short read
 * left a pipe or stream socket empty, the hooks waited for the next event
 * before trying again, so read(fd, buf, 0) parked forever. */
static void zero_after_short(int rd, int wr)
{
	char buf[4096];
	CHECK(write(wr, "0123456789", 10) == 10);
	CHECK(read(rd, buf, sizeof buf) == 10); /* short: the fd is now empty */
	CHECK(read(rd, buf, 0) == 0);
	struct iovec iov = { buf, 0 };
	CHECK(readv(rd, &iov, 1) == 0);
	CHECK(write(wr, "x", 1) == 1); /* and the next read still works */
	CHECK(read(rd, buf, sizeof buf) == 1);
}

G_TEST(hook_diff, zero_length_read_after_short_read_pipe, 10)
{
	(void)argc, (void)argv;
	int p[2];
	CHECK(pipe(p) == 0);
	zero_after_short(p[0], p[1]);
	close(p[0]);
	close(p[1]);
	return 0;
}

/* A TCP connection on loopback: fd[0] the listener, fd[1] the client's
 * end, fd[2] the accepted one. */
static void tcp_connection(int fd[3])
{
	int port = 0;
	fd[0] = tcp_listen(1, &port);
	CHECK(fd[0] >= 0);
	fd[1] = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = loopback(port);
	CHECK(connect(fd[1], (struct sockaddr *)&a, sizeof a) == 0);
	fd[2] = accept(fd[0], NULL, NULL);
	CHECK(fd[2] >= 0);
}

static void close3(const int fd[3])
{
	for (int i = 0; i < 3; i++)
		close(fd[i]);
}

G_TEST(hook_diff, zero_length_read_after_short_read_tcp, 10)
{
	(void)argc, (void)argv;
	int fd[3];
	tcp_connection(fd);
	zero_after_short(fd[2], fd[1]);
	close3(fd);
	return 0;
}

/* A finding the hooks no longer show: its regression test always runs. */
#define FIXED_TEST(name) G_TEST(hook_diff, name, 10)

/* The partner of the tests below that park a read: 5 ms later, "y" on
 * the fd arg points to. */
static void write_after(void *arg)
{
	weft_sleep(5 * 1000000);
	CHECK(write(*(int *)arg, "y", 1) == 1);
}

/* Finding 1: O_NONBLOCK is a property of the open file, shared by every
 * fd dup'ed from it.  Under weft the program's view was kept per fd
 * number, so after fcntl(dup, F_SETFL, O_NONBLOCK) a read on the original
 * fd parked instead of failing with EAGAIN.  Now the kernel's F_GETFL is
 * asked when a try would block, and a hint per fd number is asked again
 * after any F_SETFL: both directions, through either fd. */
FIXED_TEST(nonblock_shared_by_dup)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	int d = dup(sv[0]);
	CHECK(d >= 0);
	int fl = fcntl(d, F_GETFL);
	char c;
	/* the original learnt as blocking first (a park), then the dup made
	 * non-blocking: the original's read says EAGAIN */
	weft_go(write_after, &sv[1]);
	CHECK(read(sv[0], &c, 1) == 1 && c == 'y');
	CHECK(fcntl(d, F_SETFL, fl | O_NONBLOCK) == 0);
	CHECK(fcntl(sv[0], F_GETFL) & O_NONBLOCK);
	CHECK(read(sv[0], &c, 1) == -1 && err() == EAGAIN);
	CHECK(recv(sv[0], &c, 1, 0) == -1 && err() == EAGAIN);
	CHECK(read(d, &c, 1) == -1 && err() == EAGAIN);
	/* blocking again through the original: a read on the dup (whose
	 * hint said non-blocking) parks until the write */
	CHECK(fcntl(sv[0], F_SETFL, fl & ~O_NONBLOCK) == 0);
	CHECK(!(fcntl(d, F_GETFL) & O_NONBLOCK));
	weft_go(write_after, &sv[1]);
	CHECK(read(d, &c, 1) == 1 && c == 'y');
	/* and through FIONBIO on the dup */
	int on = 1;
	CHECK(ioctl(d, FIONBIO, &on) == 0);
	CHECK(read(sv[0], &c, 1) == -1 && err() == EAGAIN);
	on = 0;
	CHECK(ioctl(d, FIONBIO, &on) == 0);
	weft_go(write_after, &sv[1]);
	CHECK(read(sv[0], &c, 1) == 1 && c == 'y');
	close(d);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* The same when the file is made non-blocking where weft cannot see it
 * (a raw system call; another process sharing the file does the same):
 * a read that would block asks the kernel and says EAGAIN. */
FIXED_TEST(nonblock_set_behind_weft)
{
	(void)argc, (void)argv;
	int p[2];
	CHECK(pipe(p) == 0);
	char c;
	weft_go(write_after, &p[1]);
	CHECK(read(p[0], &c, 1) == 1); /* learnt as blocking */
	long fl = syscall(SYS_fcntl, p[0], F_GETFL);
	CHECK(syscall(SYS_fcntl, p[0], F_SETFL, fl | O_NONBLOCK) == 0);
	CHECK(read(p[0], &c, 1) == -1 && err() == EAGAIN);
	close(p[0]);
	close(p[1]);
	return 0;
}

/* Finding 3 (fixed by the per-call non-blocking tries, issue 12): a
 * file weft did not create (here a timerfd) was made non-blocking
 * underneath the first time a G waited on it; every other fd on the same
 * open file (a dup) then showed O_NONBLOCK in F_GETFL, and a G reading
 * through it got EAGAIN instead of parking. */
FIXED_TEST(own_nonblock_visible_through_dup)
{
	(void)argc, (void)argv;
	int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	CHECK(t >= 0);
	int d = dup(t);
	struct itimerspec it = { { 0, 0 }, { 0, 1000000 } };
	CHECK(timerfd_settime(t, 0, &it, NULL) == 0);
	uint64_t n = 0;
	CHECK(read(t, &n, 8) == 8 && n == 1); /* parks: weft registers t */
	CHECK(!(fcntl(d, F_GETFL) & O_NONBLOCK));
	CHECK(!(fcntl(t, F_GETFL) & O_NONBLOCK));
	CHECK(timerfd_settime(t, 0, &it, NULL) == 0);
	CHECK(read(d, &n, 8) == 8 && n == 1); /* blocks (parks), not EAGAIN */
	close(d);
	close(t);
	return 0;
}

/* Finding 8 (after the per-call tries landed): a read or write of 0
 * bytes went to the kernel as preadv2/pwritev2, which answer 0 without
 * asking the file; read(2) asks it, and a timerfd or eventfd says EINVAL
 * (a pipe: 0). */
FIXED_TEST(zero_length_read_write_asks_the_file)
{
	(void)argc, (void)argv;
	int t = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC);
	CHECK(t >= 0);
	char b[8];
	CHECK(read(t, b, 0) == -1 && err() == EINVAL);
	int e = eventfd(0, EFD_CLOEXEC);
	CHECK(e >= 0);
	CHECK(read(e, b, 0) == -1 && err() == EINVAL);
	CHECK(write(e, b, 0) == -1 && err() == EINVAL);
	uint64_t one = 1;
	CHECK(write(e, &one, 8) == 8 && read(e, &one, 8) == 8); /* counter 0: not readable */
	CHECK(read(e, b, 0) == -1 && err() == EINVAL);
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(read(p[0], b, 0) == 0);
	CHECK(write(p[1], b, 0) == 0);
	int u[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, u) == 0);
	CHECK(read(u[0], b, 0) == 0); /* nothing queued: still 0 at once */
	/* finding 9: a writev of 0 bytes sends nothing, not an empty datagram */
	struct iovec none = { b, 0 };
	CHECK(writev(u[1], &none, 1) == 0);
	CHECK(readv(u[0], &none, 1) == 0);
	CHECK(recv(u[0], b, sizeof b, MSG_DONTWAIT) == -1 && err() == EAGAIN);
	close(u[0]);
	close(u[1]);
	close(t);
	close(e);
	close(p[0]);
	close(p[1]);
	return 0;
}

/* Finding 4: after shutdown(SHUT_RD) a blocking read on a unix datagram
 * socket returns 0 (the kernel's blocking wait sees the shutdown), but a
 * non-blocking try keeps answering EAGAIN, so a G, which only ever tries
 * non-blocking and parks, waits forever. */
FIXED_TEST(dgram_read_after_shutdown_rd)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	CHECK(shutdown(sv[0], SHUT_RD) == 0);
	char buf[16];
	CHECK(read(sv[0], buf, sizeof buf) == 0);
	CHECK(recv(sv[0], buf, sizeof buf, 0) == 0);
	struct iovec iov = { buf, sizeof buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(recvmsg(sv[0], &mh, 0) == 0);
	CHECK(readv(sv[0], &iov, 1) == 0);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* Finding 13 (session 5, the faster fuzzer's 1 us timeouts): with
 * SO_RCVTIMEO set, the read waited for the netpoller's first event on
 * the socket - the hangup that makes the fix above apply - and a short
 * timeout came first: EAGAIN instead of 0.  Fresh sockets each round:
 * the hangup must not be known beforehand. */
FIXED_TEST(dgram_read_after_shutdown_rd_with_timeout)
{
	(void)argc, (void)argv;
	for (int i = 0; i < 20; i++) {
		int sv[2];
		CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
		CHECK(shutdown(sv[0], SHUT_RD) == 0);
		struct timeval tv = { 0, 1 };
		CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
		char buf[16];
		CHECK(recvfrom(sv[0], buf, sizeof buf, 0, NULL, NULL) == 0);
		CHECK(read(sv[0], buf, sizeof buf) == 0);
		CHECK(recv(sv[0], buf, sizeof buf, 0) == 0);
		close(sv[0]);
		close(sv[1]);
	}
	return 0;
}

/* Finding 14 (session 5): SO_RCVTIMEO belongs to the socket, shared by
 * its dups; weft kept it per fd number, so a timeout set through a dup
 * did not end a read on the original: it waited forever.  Now every
 * timeout set makes the others' records stale (pd_timeogen). */
FIXED_TEST(socket_timeout_set_through_dup)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	char b[8];
	CHECK(recv(sv[0], b, sizeof b, MSG_DONTWAIT) == -1 && err() == EAGAIN); /* known */
	int d = dup(sv[0]);
	struct timeval tv = { 0, 1000 };
	CHECK(setsockopt(d, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	CHECK(recv(sv[0], b, sizeof b, 0) == -1 && err() == EAGAIN); /* at the timeout */
	CHECK(read(sv[0], b, sizeof b) == -1 && err() == EAGAIN);
	/* and cleared through the original: the dup's read waits for data */
	struct timeval none = { 0, 0 };
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none) == 0);
	weft_go(write_after, &sv[1]);
	CHECK(read(d, b, sizeof b) == 1 && b[0] == 'y');
	close(d);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* The same when the G parked before the shutdown (made by another G). */
static void shut_rd_later(void *arg)
{
	weft_sleep(5 * 1000000);
	CHECK(shutdown(*(int *)arg, SHUT_RD) == 0);
}

FIXED_TEST(dgram_parked_read_sees_shutdown_rd)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv) == 0);
	weft_go(shut_rd_later, &sv[0]);
	char buf[16];
	CHECK(recv(sv[0], buf, sizeof buf, 0) == 0);
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* Finding 7: a blocking recv of 0 bytes on a TCP socket waits (for
 * data, or SO_RCVTIMEO) and then returns 0 (tcp_recvmsg's loop ends
 * with nothing to copy); its non-blocking try says EAGAIN, so under weft
 * the call waits out the timeout and fails with EAGAIN. */
FIXED_TEST(tcp_zero_recv_with_timeout)
{
	(void)argc, (void)argv;
	int fd[3];
	tcp_connection(fd);
	int c = fd[1], s = fd[2];
	struct timeval tv = { 0, 10000 };
	CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	char b;
	CHECK(recv(s, &b, 0, 0) == 0);
	CHECK(recv(s, &b, 0, MSG_PEEK) == 0);
	CHECK(recv(s, &b, 0, MSG_WAITALL) == 0);
	struct iovec iov = { &b, 0 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(recvmsg(s, &mh, 0) == 0);
	/* what arrives while it waits is left for the next read */
	weft_go(write_after, &c);
	CHECK(recv(s, &b, 0, 0) == 0);
	struct timeval none = { 0, 0 };
	CHECK(setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &none, sizeof none) == 0);
	CHECK(recv(s, &b, 1, 0) == 1 && b == 'y');
	/* a unix stream socket says EAGAIN at the timeout, as natively */
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) == 0);
	CHECK(recv(sv[0], &b, 0, 0) == -1 && err() == EAGAIN);
	close(sv[0]);
	close(sv[1]);
	close3(fd);
	return 0;
}

/* Finding 5: dup3 with bad flags fails with EINVAL and leaves newfd
 * open; weft had already forgotten what it knew of newfd (made
 * non-blocking underneath), so newfd then read as O_NONBLOCK and a G's
 * blocking read on it returned EAGAIN. */
G_TEST(hook_diff, dup3_bad_flags_leaves_newfd_alone, 10)
{
	(void)argc, (void)argv;
	int a[2], b[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, a) == 0);
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, b) == 0);
	CHECK(dup3(a[0], b[0], O_NONBLOCK) == -1 && err() == EINVAL);
	CHECK(!(fcntl(b[0], F_GETFL) & O_NONBLOCK));
	weft_go(write_after, &b[1]);
	char c = 0;
	CHECK(read(b[0], &c, 1) == 1 && c == 'y'); /* parks until the write */
	for (int i = 0; i < 2; i++) {
		close(a[i]);
		close(b[i]);
	}
	return 0;
}

/* Finding 6: recv(MSG_PEEK | MSG_WAITALL) on a unix stream socket
 * returns what is there (the kernel's peek does not wait for more);
 * weft's fill-the-buffer loop peeked the same bytes again and again and
 * returned the whole length, the data repeated. */
G_TEST(hook_diff, peek_waitall_returns_what_is_there, 10)
{
	(void)argc, (void)argv;
	int sv[2];
	CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
	CHECK(write(sv[1], "0123456789", 10) == 10);
	char buf[100];
	memset(buf, 0, sizeof buf);
	CHECK(recv(sv[0], buf, sizeof buf, MSG_PEEK | MSG_WAITALL) == 10);
	CHECK(memcmp(buf, "0123456789", 10) == 0 && buf[10] == 0);
	struct iovec iov = { buf, sizeof buf };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(recvmsg(sv[0], &mh, MSG_PEEK | MSG_WAITALL) == 10);
	CHECK(read(sv[0], buf, sizeof buf) == 10); /* nothing was consumed */
	close(sv[0]);
	close(sv[1]);
	return 0;
}

/* Finding 10: a socket call (recv, recvmsg, send...) on a file that is
 * not a socket fails with ENOTSOCK at once; weft, which tries it by
 * asking poll first on such a file, waited for data: recvmsg on an empty
 * eventfd (or recv on an empty pipe) parked forever. */
FIXED_TEST(socket_call_on_non_socket_enotsock)
{
	(void)argc, (void)argv;
	int e = eventfd(0, EFD_CLOEXEC);
	CHECK(e >= 0);
	char b[8];
	struct iovec iov = { b, 1 };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	CHECK(recvmsg(e, &mh, 0) == -1 && err() == ENOTSOCK);
	CHECK(recv(e, b, 1, 0) == -1 && err() == ENOTSOCK);
	CHECK(recvfrom(e, b, 8, MSG_WAITALL, NULL, NULL) == -1 && err() == ENOTSOCK);
	CHECK(read(e, b, 1) == -1 && err() == EINVAL);
	int p[2];
	CHECK(pipe(p) == 0);
	CHECK(recv(p[0], b, 1, 0) == -1 && err() == ENOTSOCK);
	/* finding 12: after a short read left the pipe empty, recv waited
	 * for the next event before making the call */
	CHECK(write(p[1], "abc", 3) == 3);
	CHECK(read(p[0], b, 8) == 3);
	CHECK(recv(p[0], b, 8, 0) == -1 && err() == ENOTSOCK);
	CHECK(accept(p[0], NULL, NULL) == -1 && err() == ENOTSOCK);
	CHECK(send(p[1], b, 1, 0) == -1 && err() == ENOTSOCK);
	CHECK(sendmsg(p[1], &mh, 0) == -1 && err() == ENOTSOCK);
	close(e);
	close(p[0]);
	close(p[1]);
	return 0;
}

static void write_after_ev(void *arg)
{
	weft_sleep(5 * 1000000);
	uint64_t two = 2;
	CHECK(write(*(int *)arg, &two, 8) == 8);
}

/* Finding 11: an eventfd refuses RWF_NOWAIT for writes only (EOPNOTSUPP);
 * weft then made every try on it ask poll first, reads too, so a short
 * read (fewer than 8 bytes: EINVAL at once) of an empty eventfd parked
 * forever after the first write. */
FIXED_TEST(eventfd_short_read_after_write)
{
	(void)argc, (void)argv;
	int e = eventfd(0, EFD_CLOEXEC);
	CHECK(e >= 0);
	uint64_t v = 1;
	CHECK(write(e, &v, 8) == 8); /* RWF_NOWAIT refused: writes poll first */
	CHECK(read(e, &v, 8) == 8 && v == 1);
	char b[8];
	CHECK(read(e, b, 7) == -1 && err() == EINVAL);
	CHECK(write(e, b, 7) == -1 && err() == EINVAL);
	weft_go(write_after_ev, &e);
	CHECK(read(e, &v, 8) == 8 && v == 2); /* parks until the write */
	close(e);
	return 0;
}

/* An eventfd write is one call whose answer is the answer.  Before
 * Linux 6.18 (whose eventfd refuses any length but 8 with EINVAL) the
 * kernel takes the first 8 bytes of a longer write and returns 8 (fs/
 * eventfd.c: "count < sizeof(ucnt)" is its only length check); weft's
 * loop for blocking writes would then write the rest as a second value,
 * as for a pipe.  writev asks the file once per iovec, stopping at a
 * short one.  The same calls on a plain thread (the kernel's answers) and
 * on a G must agree, whatever the kernel: an eventfd weft saw made, one
 * made by a raw system call (learnt by its first write), a dup. */
#define EV_ANSWERS 12

static void ev_answers(int e, long *out)
{
	uint64_t two[2] = { 3, 5 }, one = 1, v = 0;
	struct iovec whole = { two, 16 }, halves[2] = { { &two[0], 8 }, { &two[1], 8 } };
	int k = 0;
	out[k++] = write(e, two, 16);
	out[k++] = err();
	out[k++] = write(e, &one, 8); /* never empty before a read: none blocks */
	out[k++] = read(e, &v, 8);
	out[k++] = (long)v;
	out[k++] = writev(e, &whole, 1);
	out[k++] = err();
	out[k++] = write(e, &one, 8);
	out[k++] = read(e, &v, 8);
	out[k++] = (long)v;
	out[k++] = writev(e, halves, 2);
	out[k++] = read(e, &v, 8) == 8 ? (long)v : -1;
}

struct ev_plain {
	int fd;
	long out[EV_ANSWERS];
};

static void *ev_plain_thread(void *arg)
{
	struct ev_plain *p = arg;
	ev_answers(p->fd, p->out);
	return NULL;
}

static void ev_agree(int g_fd, int plain_fd)
{
	struct ev_plain p = { plain_fd, { 0 } };
	pthread_t t;
	CHECK(pthread_create(&t, NULL, ev_plain_thread, &p) == 0); /* not a G: no hooks */
	CHECK(pthread_join(t, NULL) == 0);
	long g[EV_ANSWERS];
	ev_answers(g_fd, g);
	for (int i = 0; i < EV_ANSWERS; i++)
		if (!((i == 1 || i == 6) && g[i - 1] >= 0)) { /* errno only after a failure */
			if (g[i] != p.out[i])
				fprintf(stderr, "answer %d: %ld on a G, %ld on a thread\n", i, g[i],
					p.out[i]);
			CHECK(g[i] == p.out[i]);
		}
}

FIXED_TEST(eventfd_write_one_call)
{
	(void)argc, (void)argv;
	int e = eventfd(0, 0), pe = eventfd(0, 0);
	CHECK(e >= 0 && pe >= 0);
	ev_agree(e, pe);
	int raw = (int)syscall(SYS_eventfd2, 0, 0), praw = (int)syscall(SYS_eventfd2, 0, 0);
	CHECK(raw >= 0 && praw >= 0);
	ev_agree(raw, praw);
	int d = dup(e), pd = dup(pe);
	CHECK(d >= 0 && pd >= 0);
	ev_agree(d, pd);
	close(d), close(pd), close(raw), close(praw), close(e), close(pe);
	return 0;
}
