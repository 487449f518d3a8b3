/*
 * test_chan.c - channels and select: what Go's chan_test.go and
 * select_test.go check, plus Gs and plain threads on the same channel.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "check.h"

/* ---- make, len, cap ------------------------------------------------------ */

Test(chan, make_len_cap)
{
	weft_chan_t *c = weft_chan_make(sizeof(int), 4);
	cr_assert_not_null(c);
	cr_assert_eq(weft_chan_cap(c), 4);
	cr_assert_eq(weft_chan_len(c), 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(weft_chan_send(c, &i), 0);
	cr_assert_eq(weft_chan_len(c), 3);
	int v;
	cr_assert_eq(weft_chan_recv(c, &v), 1);
	cr_assert_eq(v, 0);
	cr_assert_eq(weft_chan_len(c), 2);
	weft_chan_free(c);

	weft_chan_t *u = weft_chan_make(0, 0);
	cr_assert_not_null(u);
	cr_assert_eq(weft_chan_cap(u), 0);
	cr_assert_eq(weft_chan_len(u), 0);
	weft_chan_free(u);

	/* nil channel, as Go's len(nil) and cap(nil) */
	cr_assert_eq(weft_chan_len(NULL), 0);
	cr_assert_eq(weft_chan_cap(NULL), 0);
	weft_chan_free(NULL);

	errno = 0;
	cr_assert_null(weft_chan_make(SIZE_MAX / 2, 4));
	cr_assert_eq(errno, EINVAL);
	errno = 0;
	cr_assert_eq(weft_chan_send(NULL, &v), -1);
	cr_assert_eq(errno, EINVAL);
}

/* ---- buffered: FIFO, never blocks below capacity --------------------------- */

static int buffered_fifo(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 1; cap <= 64; cap *= 4) {
		weft_chan_t *c = weft_chan_make(sizeof(long), cap);
		for (long round = 0; round < 3; round++) {
			for (long i = 0; i < (long)cap; i++) {
				long v = round * 1000 + i;
				CHECK(weft_chan_trysend(c, &v) == 0);
			}
			long x = -1;
			CHECK(weft_chan_trysend(c, &x) == -1 && err() == EAGAIN);
			CHECK(weft_chan_len(c) == cap);
			for (long i = 0; i < (long)cap; i++) {
				long v = -1;
				CHECK(weft_chan_recv(c, &v) == 1);
				CHECK(v == round * 1000 + i);
			}
			CHECK(weft_chan_tryrecv(c, &x) == -1 && err() == EAGAIN);
		}
		weft_chan_free(c);
	}
	return 0;
}

Test(chan, buffered_fifo)
{
	run_main(buffered_fifo);
}

/* ---- unbuffered: a send waits for its receiver ------------------------------ */

static weft_chan_t *rv_c;
static int rv_sent;

static void rv_sender(void *arg)
{
	(void)arg;
	int v = 42;
	CHECK(weft_chan_send(rv_c, &v) == 0);
	__atomic_store_n(&rv_sent, 1, __ATOMIC_RELEASE);
}

static int rendezvous(int argc, char **argv)
{
	(void)argc, (void)argv;
	rv_c = weft_chan_make(sizeof(int), 0);
	weft_go(rv_sender, NULL);
	weft_sleep(20 * 1000 * 1000);
	/* nobody received yet: the sender must still be blocked */
	CHECK(__atomic_load_n(&rv_sent, __ATOMIC_ACQUIRE) == 0);
	CHECK(weft_chan_len(rv_c) == 0);
	/* the sender may not have reached its send yet (TSan, a loaded
	 * machine: it once had not after the 20 ms, and the test then waited
	 * for a send that could never end); wait for it, never past it */
	int v = 0, r;
	while ((r = weft_chan_tryrecv(rv_c, &v)) == -1 && err() == EAGAIN) {
		CHECK(__atomic_load_n(&rv_sent, __ATOMIC_ACQUIRE) == 0);
		weft_sleep(1000 * 1000);
	}
	CHECK(r == 1);
	CHECK(v == 42);
	while (!__atomic_load_n(&rv_sent, __ATOMIC_ACQUIRE))
		weft_sleep(1000 * 1000);
	/* and a receive with no sender would block */
	CHECK(weft_chan_tryrecv(rv_c, &v) == -1 && err() == EAGAIN);
	int one = 1;
	CHECK(weft_chan_trysend(rv_c, &one) == -1 && err() == EAGAIN);
	return 0;
}

Test(chan, unbuffered_rendezvous)
{
	run_main(rendezvous);
}

/* Go's TestChan: for each capacity, a receiver that blocks gets the
 * value sent later, and a sender blocks once the buffer is full. */
static weft_chan_t *gc_c;
static int gc_recvd;

static void gc_recv(void *arg)
{
	(void)arg;
	int v;
	CHECK(weft_chan_recv(gc_c, &v) == 1);
	CHECK(v == 7);
	__atomic_store_n(&gc_recvd, 1, __ATOMIC_RELEASE);
}

static void gc_fill(void *arg)
{
	size_t cap = (size_t)(uintptr_t)arg;
	for (size_t i = 0; i <= cap; i++) { /* the last one blocks */
		int v = (int)i;
		CHECK(weft_chan_send(gc_c, &v) == 0);
	}
	__atomic_store_n(&gc_recvd, 2, __ATOMIC_RELEASE);
}

static int go_testchan(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap < 20; cap += 3) {
		gc_c = weft_chan_make(sizeof(int), cap);
		gc_recvd = 0;
		weft_go(gc_recv, NULL);
		weft_sleep(2 * 1000 * 1000);
		CHECK(__atomic_load_n(&gc_recvd, __ATOMIC_ACQUIRE) == 0); /* blocked */
		int v = 7;
		CHECK(weft_chan_send(gc_c, &v) == 0);
		while (__atomic_load_n(&gc_recvd, __ATOMIC_ACQUIRE) != 1)
			weft_yield();

		gc_recvd = 0;
		weft_go(gc_fill, (void *)(uintptr_t)cap);
		while (weft_chan_len(gc_c) < cap)
			weft_yield();
		weft_sleep(2 * 1000 * 1000);
		CHECK(__atomic_load_n(&gc_recvd, __ATOMIC_ACQUIRE) == 0); /* blocked on cap+1 */
		for (size_t i = 0; i <= cap; i++) {
			CHECK(weft_chan_recv(gc_c, &v) == 1);
			CHECK(v == (int)i);
		}
		while (__atomic_load_n(&gc_recvd, __ATOMIC_ACQUIRE) != 2)
			weft_yield();
		CHECK(weft_chan_len(gc_c) == 0);
		weft_chan_free(gc_c);
	}
	return 0;
}

Test(chan, go_testchan)
{
	run_main(go_testchan);
}

/* ---- close ------------------------------------------------------------------- */

static int close_semantics(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_chan_t *c = weft_chan_make(sizeof(int), 3);
	int a = 1, b = 2;
	weft_chan_send(c, &a);
	weft_chan_send(c, &b);
	CHECK(weft_chan_close(c) == 0);
	CHECK(weft_chan_close(c) == -1 && err() == EPIPE);
	CHECK(weft_chan_send(c, &a) == -1 && err() == EPIPE);
	CHECK(weft_chan_trysend(c, &a) == -1 && err() == EPIPE);
	/* the buffer drains first, then 0 with the element zeroed */
	int v = -1;
	CHECK(weft_chan_recv(c, &v) == 1 && v == 1);
	CHECK(weft_chan_recv(c, &v) == 1 && v == 2);
	v = 99;
	CHECK(weft_chan_recv(c, &v) == 0 && v == 0);
	v = 99;
	CHECK(weft_chan_tryrecv(c, &v) == 0 && v == 0);
	CHECK(weft_chan_recv(c, NULL) == 0);
	CHECK(weft_chan_len(c) == 0);
	weft_chan_free(c);
	return 0;
}

Test(chan, close_semantics)
{
	run_main(close_semantics);
}

#define NBLOCKED 50
static weft_chan_t *cl_c;
static weft_wg_t cl_wg = WEFT_WG_INIT;
static int cl_zero, cl_epipe;

static void cl_receiver(void *arg)
{
	(void)arg;
	long v = 123;
	if (weft_chan_recv(cl_c, &v) == 0 && v == 0)
		__atomic_fetch_add(&cl_zero, 1, __ATOMIC_RELAXED);
	weft_wg_done(&cl_wg);
}

static void cl_sender(void *arg)
{
	(void)arg;
	long v = 5;
	if (weft_chan_send(cl_c, &v) == -1 && err() == EPIPE)
		__atomic_fetch_add(&cl_epipe, 1, __ATOMIC_RELAXED);
	weft_wg_done(&cl_wg);
}

static void *cl_thread_recv(void *arg)
{
	cl_receiver(arg);
	return NULL;
}

static void *cl_thread_send(void *arg)
{
	cl_sender(arg);
	return NULL;
}

/* close wakes every receiver (0) and every blocked sender (EPIPE),
 * whether it is a G or a plain thread */
static int close_wakes_all(int argc, char **argv)
{
	(void)argc, (void)argv;
	pthread_t t[4];
	for (int pass = 0; pass < 2; pass++) {
		cl_c = weft_chan_make(sizeof(long), 0);
		cl_zero = cl_epipe = 0;
		weft_wg_add(&cl_wg, NBLOCKED + 2);
		for (int i = 0; i < NBLOCKED; i++)
			weft_go(pass ? cl_sender : cl_receiver, NULL);
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, pass ? cl_thread_send : cl_thread_recv, NULL);
		weft_sleep(20 * 1000 * 1000);
		CHECK(weft_chan_close(cl_c) == 0);
		weft_wg_wait(&cl_wg);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		CHECK((pass ? cl_epipe : cl_zero) == NBLOCKED + 2);
		weft_chan_free(cl_c);
	}
	return 0;
}

Test(chan, close_wakes_all)
{
	run_main(close_wakes_all);
}

/* Large elements are copied whole, buffered and direct. */
struct big {
	char bytes[1000];
};

static weft_chan_t *big_c;

static void big_sender(void *arg)
{
	(void)arg;
	struct big b;
	for (int i = 0; i < 100; i++) {
		memset(b.bytes, i, sizeof b.bytes);
		weft_chan_send(big_c, &b);
	}
}

static int big_elems(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap < 8; cap += 7) {
		big_c = weft_chan_make(sizeof(struct big), cap);
		weft_go(big_sender, NULL);
		for (int i = 0; i < 100; i++) {
			struct big b;
			CHECK(weft_chan_recv(big_c, &b) == 1);
			CHECK(b.bytes[0] == (char)i && b.bytes[999] == (char)i &&
			      b.bytes[500] == (char)i);
		}
		weft_chan_free(big_c);
	}
	return 0;
}

Test(chan, big_elements)
{
	run_main(big_elems);
}

/* elem_size 0: a pure signal; elem pointers may be NULL */
static weft_chan_t *sig_c;

static void sig_sender(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++)
		weft_chan_send(sig_c, NULL);
	weft_chan_close(sig_c);
}

static int zero_size(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap < 20; cap += 19) {
		sig_c = weft_chan_make(0, cap);
		weft_go(sig_sender, NULL);
		int n = 0;
		while (weft_chan_recv(sig_c, NULL) == 1)
			n++;
		CHECK(n == 1000);
		weft_chan_free(sig_c);
	}
	return 0;
}

Test(chan, zero_size_elements)
{
	run_main(zero_size);
}

/* ---- select ----------------------------------------------------------------- */

static int select_basics(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_chan_t *a = weft_chan_make(sizeof(int), 1);
	weft_chan_t *b = weft_chan_make(sizeof(int), 1);
	int va = 0, vb = 0;
	weft_case_t cs[3] = {
		{ a, WEFT_RECV, &va, 0 },
		{ NULL, WEFT_RECV, &vb, 0 }, /* nil channel: never fires */
		{ b, WEFT_RECV, &vb, 0 },
	};
	/* nothing ready: polling returns -1 ETIMEDOUT (Go's default:) */
	errno = 0;
	CHECK(weft_select(cs, 3, 0) == -1 && err() == ETIMEDOUT);
	int x = 5;
	weft_chan_send(b, &x);
	CHECK(weft_select(cs, 3, 0) == 2);
	CHECK(vb == 5 && cs[2].ok == 1);
	CHECK(weft_chan_len(b) == 0);

	/* send cases: a has room, then not */
	weft_case_t ss[2] = { { a, WEFT_SEND, &x, 0 }, { NULL, WEFT_SEND, &x, 0 } };
	CHECK(weft_select(ss, 2, 0) == 0 && ss[0].ok == 1);
	CHECK(weft_select(ss, 2, 0) == -1 && err() == ETIMEDOUT);
	CHECK(weft_chan_len(a) == 1);

	/* closed: a receive fires with ok 0 and the element zeroed, a send
	 * fires with ok -1 */
	weft_chan_recv(a, &va);
	weft_chan_close(a);
	va = 77;
	CHECK(weft_select(cs, 3, 0) == 0 && cs[0].ok == 0 && va == 0);
	CHECK(weft_select(ss, 2, -1) == 0 && ss[0].ok == -1);

	/* only nil channels with a timeout: waits it out */
	weft_case_t nils[2] = { { NULL, WEFT_RECV, NULL, 0 }, { NULL, WEFT_SEND, NULL, 0 } };
	int64_t t0 = now_ns();
	CHECK(weft_select(nils, 2, 10 * 1000 * 1000) == -1 && err() == ETIMEDOUT);
	CHECK(now_ns() - t0 >= 10 * 1000 * 1000);
	CHECK(weft_select(NULL, 0, 0) == -1 && err() == ETIMEDOUT);

	/* bad arguments */
	weft_case_t bad = { b, 3, NULL, 0 };
	CHECK(weft_select(&bad, 1, 0) == -1 && err() == EINVAL);
	CHECK(weft_select(NULL, 2, 0) == -1 && err() == EINVAL);
	weft_chan_free(a);
	weft_chan_free(b);
	return 0;
}

Test(select, basics)
{
	run_main(select_basics);
}

static weft_chan_t *st_c;

static void st_late_sender(void *arg)
{
	int64_t delay = (int64_t)(intptr_t)arg;
	weft_sleep(delay);
	int v = 9;
	weft_chan_send(st_c, &v);
}

/* A blocked select fires when a sender arrives, and times out when none
 * does; the timeout is at least what was asked for. */
static int select_block_timeout(int argc, char **argv)
{
	(void)argc, (void)argv;
	st_c = weft_chan_make(sizeof(int), 0);
	weft_chan_t *never = weft_chan_make(sizeof(int), 0);
	int v = 0, w = 0;
	weft_case_t cs[2] = { { never, WEFT_RECV, &w, 0 }, { st_c, WEFT_RECV, &v, 0 } };
	weft_go(st_late_sender, (void *)(intptr_t)(5 * 1000 * 1000));
	CHECK(weft_select(cs, 2, -1) == 1 && v == 9 && cs[1].ok == 1);

	int64_t t0 = now_ns();
	CHECK(weft_select(cs, 2, 15 * 1000 * 1000) == -1 && err() == ETIMEDOUT);
	int64_t el = now_ns() - t0;
	CHECK(el >= 15 * 1000 * 1000 && el < 5LL * 1000 * 1000 * 1000 * test_slow());

	/* fires before a long timeout */
	weft_go(st_late_sender, (void *)(intptr_t)(2 * 1000 * 1000));
	CHECK(weft_select(cs, 2, 10LL * 1000 * 1000 * 1000) == 1 && v == 9);
	/* a stale timer from that select must not end a later wait early */
	t0 = now_ns();
	CHECK(weft_select(cs, 2, 20 * 1000 * 1000) == -1);
	CHECK(now_ns() - t0 >= 20 * 1000 * 1000);

	/* the send side of a select blocks too */
	weft_case_t snd = { st_c, WEFT_SEND, &v, 0 };
	CHECK(weft_select(&snd, 1, 5 * 1000 * 1000) == -1 && err() == ETIMEDOUT);
	CHECK(weft_chan_len(st_c) == 0);
	return 0;
}

Test(select, block_and_timeout)
{
	run_main(select_block_timeout);
}

/* Go's TestSelfSelect: two Gs each select on sending and receiving on
 * the same channel; they must pair up, never with themselves. */
static weft_chan_t *self_c;
static weft_wg_t self_wg = WEFT_WG_INIT;

static void self_selector(void *arg)
{
	int p = (int)(intptr_t)arg;
	for (int i = 0; i < 1000; i++) {
		int out = p, in = -1;
		weft_case_t cs[2];
		if (p == 0 || i % 2 == 0) {
			cs[0] = (weft_case_t){ self_c, WEFT_SEND, &out, 0 };
			cs[1] = (weft_case_t){ self_c, WEFT_RECV, &in, 0 };
		} else {
			cs[0] = (weft_case_t){ self_c, WEFT_RECV, &in, 0 };
			cs[1] = (weft_case_t){ self_c, WEFT_SEND, &out, 0 };
		}
		int k = weft_select(cs, 2, -1);
		CHECK(k == 0 || k == 1);
		if (cs[k].op == WEFT_RECV && weft_chan_cap(self_c) == 0)
			CHECK(in != p); /* a rendezvous never pairs us with ourselves */
	}
	weft_wg_done(&self_wg);
}

static int self_select(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap <= 10; cap += 10) {
		self_c = weft_chan_make(sizeof(int), cap);
		weft_wg_add(&self_wg, 2);
		weft_go(self_selector, (void *)0);
		weft_go(self_selector, (void *)1);
		weft_wg_wait(&self_wg);
		weft_chan_free(self_c);
	}
	return 0;
}

Test(select, self_select, .timeout = 60)
{
	run_main(self_select);
}

/* Go's TestPseudoRandomSend: a select with two sends of 0 and 1 on the
 * same channel picks both, roughly evenly. */
static weft_chan_t *prs_c;
static int prs_counts[2];

static void prs_reader(void *arg)
{
	(void)arg;
	for (int i = 0; i < 1000; i++) {
		int v;
		weft_chan_recv(prs_c, &v);
		__atomic_add_fetch(&prs_counts[v & 1], 1, __ATOMIC_RELAXED);
	}
}

static int pseudo_random_send(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap < 2; cap++) {
		prs_c = weft_chan_make(sizeof(int), cap);
		/* atomic: the last reader's last add is not ordered before us */
		__atomic_store_n(&prs_counts[0], 0, __ATOMIC_RELAXED);
		__atomic_store_n(&prs_counts[1], 0, __ATOMIC_RELAXED);
		weft_go(prs_reader, NULL);
		int zero = 0, one = 1;
		weft_case_t cs[2] = { { prs_c, WEFT_SEND, &zero, 0 }, { prs_c, WEFT_SEND, &one, 0 } };
		for (int i = 0; i < 1000; i++)
			CHECK(weft_select(cs, 2, -1) >= 0);
		while (__atomic_load_n(&prs_counts[0], __ATOMIC_RELAXED) +
			       __atomic_load_n(&prs_counts[1], __ATOMIC_RELAXED) <
		       1000)
			weft_sleep(1000 * 1000);
		/* P(either < 300 of 1000) for a fair coin is far below 1e-30 */
		CHECK(__atomic_load_n(&prs_counts[0], __ATOMIC_RELAXED) > 300 &&
		      __atomic_load_n(&prs_counts[1], __ATOMIC_RELAXED) > 300);
	}
	return 0;
}

Test(select, pseudo_random_send)
{
	run_main(pseudo_random_send);
}

/* Fairness: with every case ready, each is chosen uniformly.  Half the
 * channels are closed (receive fires with ok 0), half hold data.  The
 * chi-square statistic with 7 degrees of freedom exceeds 40.53 with
 * probability 1e-6 for a fair choice; we allow 41. */
#define FAIR_K 8
#define FAIR_ROUNDS 200000

static int select_fairness(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_chan_t *ch[FAIR_K];
	weft_case_t cs[FAIR_K];
	long v;
	for (int i = 0; i < FAIR_K; i++) {
		ch[i] = weft_chan_make(sizeof(long), i % 2 ? FAIR_ROUNDS : 0);
		if (i % 2 == 0)
			weft_chan_close(ch[i]);
		else
			for (long j = 0; j < FAIR_ROUNDS; j++)
				weft_chan_send(ch[i], &j);
		cs[i] = (weft_case_t){ ch[i], WEFT_RECV, &v, 0 };
	}
	long count[FAIR_K] = { 0 };
	for (int r = 0; r < FAIR_ROUNDS; r++) {
		int k = weft_select(cs, FAIR_K, 0);
		CHECK(k >= 0 && k < FAIR_K);
		if (k >= 0 && k < FAIR_K) {
			count[k]++;
			CHECK(cs[k].ok == (k % 2 ? 1 : 0));
		}
	}
	double expect = (double)FAIR_ROUNDS / FAIR_K, chi2 = 0;
	for (int i = 0; i < FAIR_K; i++)
		chi2 += (count[i] - expect) * (count[i] - expect) / expect;
	if (chi2 >= 41.0)
		fprintf(stderr, "select fairness: chi2 = %.2f\n", chi2);
	CHECK(chi2 < 41.0);
	for (int i = 0; i < FAIR_K; i++)
		weft_chan_free(ch[i]);
	return 0;
}

Test(select, fairness_chi_square, .timeout = 60)
{
	run_main(select_fairness);
}

/* Many cases (beyond the on-stack fast path), one fires per round. */
#define MANY 40
static weft_chan_t *many_c[MANY];

static void many_sender(void *arg)
{
	(void)arg;
	for (int r = 0; r < 400; r++) {
		int i = r % MANY;
		weft_chan_send(many_c[i], &i);
	}
}

static int select_many(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_case_t cs[MANY];
	int got[MANY];
	for (int i = 0; i < MANY; i++) {
		many_c[i] = weft_chan_make(sizeof(int), 0);
		cs[i] = (weft_case_t){ many_c[i], WEFT_RECV, &got[i], 0 };
	}
	weft_go(many_sender, NULL);
	for (int r = 0; r < 400; r++) {
		int k = weft_select(cs, MANY, -1);
		CHECK(k == r % MANY && got[k] == k);
	}
	return 0;
}

Test(select, many_cases)
{
	run_main(select_many);
}

/* Go's TestNonblockSelectRace: a polling select racing with a close
 * must see either the value or the close. */
static weft_chan_t *nbr_c;
static weft_chan_t *nbr_done;

static void nbr_closer(void *arg)
{
	(void)arg;
	weft_chan_close(nbr_c);
	weft_chan_send(nbr_done, NULL);
}

static int nonblock_select_race(int argc, char **argv)
{
	(void)argc, (void)argv;
	nbr_done = weft_chan_make(0, 1);
	for (int i = 0; i < 20000; i++) {
		nbr_c = weft_chan_make(sizeof(int), 1);
		int v = 1;
		weft_chan_send(nbr_c, &v);
		weft_go(nbr_closer, NULL);
		weft_case_t cs[1] = { { nbr_c, WEFT_RECV, &v, 0 } };
		int k = weft_select(cs, 1, 0);
		CHECK(k == 0); /* the value is there, closed or not */
		weft_chan_recv(nbr_done, NULL);
		weft_chan_free(nbr_c);
	}
	return 0;
}

Test(select, nonblock_race, .timeout = 60)
{
	run_main(nonblock_select_race);
}

/* Select stress: Gs selecting over several channels in both directions
 * against plain senders and receivers; every value arrives once. */
#define SS_CH 4
#define SS_N 20000
static weft_chan_t *ss_c[SS_CH];
static weft_wg_t ss_wg = WEFT_WG_INIT;
static long ss_sum;

static void ss_plain_sender(void *arg)
{
	int i = (int)(intptr_t)arg;
	for (long j = 1; j <= SS_N; j++)
		weft_chan_send(ss_c[i], &j);
	weft_wg_done(&ss_wg);
}

static void ss_select_receiver(void *arg)
{
	(void)arg;
	long v[SS_CH], sum = 0;
	weft_case_t cs[SS_CH];
	for (int i = 0; i < SS_CH; i++)
		cs[i] = (weft_case_t){ ss_c[i], WEFT_RECV, &v[i], 0 };
	for (int n = 0; n < SS_N * SS_CH / 2; n++) {
		int k = weft_select(cs, SS_CH, -1);
		sum += v[k];
	}
	__atomic_fetch_add(&ss_sum, sum, __ATOMIC_RELAXED);
	weft_wg_done(&ss_wg);
}

static void *ss_thread_receiver(void *arg)
{
	ss_select_receiver(arg);
	return NULL;
}

static int select_stress(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (int i = 0; i < SS_CH; i++)
		ss_c[i] = weft_chan_make(sizeof(long), (size_t)i); /* caps 0..3 */
	weft_wg_add(&ss_wg, SS_CH + 2);
	for (int i = 0; i < SS_CH; i++)
		weft_go(ss_plain_sender, (void *)(intptr_t)i);
	pthread_t t;
	pthread_create(&t, NULL, ss_thread_receiver, NULL);
	weft_go(ss_select_receiver, NULL);
	weft_wg_wait(&ss_wg);
	pthread_join(t, NULL);
	CHECK(ss_sum == (long)SS_CH * SS_N * (SS_N + 1) / 2);
	return 0;
}

Test(select, stress_gs_and_threads, .timeout = 60)
{
	run_main(select_stress);
}

/* select from a plain thread: timeout, then a G's send */
static weft_chan_t *pt_c;
static int pt_timedout;

static void *pt_selector(void *arg)
{
	(void)arg;
	int v = 0;
	weft_case_t cs[1] = { { pt_c, WEFT_RECV, &v, 0 } };
	CHECK(weft_select(cs, 1, 5 * 1000 * 1000) == -1 && err() == ETIMEDOUT);
	__atomic_store_n(&pt_timedout, 1, __ATOMIC_RELEASE);
	CHECK(weft_select(cs, 1, -1) == 0 && v == 31);
	return NULL;
}

static int select_plain_thread(int argc, char **argv)
{
	(void)argc, (void)argv;
	pt_c = weft_chan_make(sizeof(int), 0);
	pthread_t t;
	pthread_create(&t, NULL, pt_selector, NULL);
	/* the send only after the timed select is over (under TSan at load
	 * 40-80 the thread had not even reached it after a 20 ms sleep: the
	 * select found the send and the one after it waited for good) */
	while (!__atomic_load_n(&pt_timedout, __ATOMIC_ACQUIRE))
		weft_sleep(1000 * 1000);
	int v = 31;
	CHECK(weft_chan_send(pt_c, &v) == 0);
	pthread_join(t, NULL);
	return 0;
}

Test(select, from_plain_thread)
{
	run_main(select_plain_thread);
}

/* ---- many parties --------------------------------------------------------------- */

/* Pipeline: 1,000 Gs in a chain, 1,000 messages through every stage:
 * 1,000,000 message passes.  Each stage adds its index. */
#define PIPE_STAGES 1000
#define PIPE_MSGS 1000
static weft_chan_t *pipe_c[PIPE_STAGES + 1];

static void pipe_stage(void *arg)
{
	long i = (long)(intptr_t)arg;
	long v;
	while (weft_chan_recv(pipe_c[i], &v) == 1)
		weft_chan_send(pipe_c[i + 1], &(long){ v + i });
	weft_chan_close(pipe_c[i + 1]);
}

static void pipe_source(void *arg)
{
	(void)arg;
	for (long m = 0; m < PIPE_MSGS; m++)
		weft_chan_send(pipe_c[0], &m);
	weft_chan_close(pipe_c[0]);
}

static int pipeline(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (int i = 0; i <= PIPE_STAGES; i++)
		pipe_c[i] = weft_chan_make(sizeof(long), (size_t)(i % 3)); /* mixed capacities */
	for (long i = 0; i < PIPE_STAGES; i++)
		CHECK(weft_go(pipe_stage, (void *)(intptr_t)i) > 0);
	weft_go(pipe_source, NULL);
	long v, sum = 0, n = 0, prev = -1;
	while (weft_chan_recv(pipe_c[PIPE_STAGES], &v) == 1) {
		CHECK(v > prev); /* order kept */
		prev = v;
		sum += v;
		n++;
	}
	long stagesum = (long)PIPE_STAGES * (PIPE_STAGES - 1) / 2;
	CHECK(n == PIPE_MSGS);
	CHECK(sum == (long)PIPE_MSGS * (PIPE_MSGS - 1) / 2 + PIPE_MSGS * stagesum);
	return 0;
}

Test(chan, pipeline_1000_gs, .timeout = 60)
{
	run_main(pipeline);
}

/* Senders and receivers split between Gs and plain threads, on one
 * channel, buffered and unbuffered. */
#define MIX_SEND 4
#define MIX_RECV 4
#define MIX_N 50000
static weft_chan_t *mix_c;
static weft_wg_t mix_senders = WEFT_WG_INIT, mix_receivers = WEFT_WG_INIT;
static long mix_sum, mix_count;

static void mix_send(void *arg)
{
	long base = (long)(intptr_t)arg * MIX_N;
	for (long j = 1; j <= MIX_N; j++) {
		long v = base + j;
		CHECK(weft_chan_send(mix_c, &v) == 0);
	}
	weft_wg_done(&mix_senders);
}

static void mix_recv(void *arg)
{
	(void)arg;
	long v, sum = 0, n = 0;
	while (weft_chan_recv(mix_c, &v) == 1) {
		sum += v;
		n++;
	}
	__atomic_fetch_add(&mix_sum, sum, __ATOMIC_RELAXED);
	__atomic_fetch_add(&mix_count, n, __ATOMIC_RELAXED);
	weft_wg_done(&mix_receivers);
}

static void *mix_thread(void *arg)
{
	intptr_t a = (intptr_t)arg;
	if (a < 0)
		mix_recv(NULL);
	else
		mix_send((void *)a);
	return NULL;
}

static int gs_and_threads(int argc, char **argv)
{
	(void)argc, (void)argv;
	for (size_t cap = 0; cap <= 16; cap += 16) {
		mix_c = weft_chan_make(sizeof(long), cap);
		mix_sum = mix_count = 0;
		pthread_t t[MIX_SEND + MIX_RECV];
		int nt = 0;
		weft_wg_add(&mix_senders, MIX_SEND);
		weft_wg_add(&mix_receivers, MIX_RECV);
		for (intptr_t i = 0; i < MIX_SEND; i++) {
			if (i % 2)
				pthread_create(&t[nt++], NULL, mix_thread, (void *)i);
			else
				weft_go(mix_send, (void *)i);
		}
		for (int i = 0; i < MIX_RECV; i++) {
			if (i % 2)
				pthread_create(&t[nt++], NULL, mix_thread, (void *)(intptr_t)-1);
			else
				weft_go(mix_recv, NULL);
		}
		weft_wg_wait(&mix_senders);
		weft_chan_close(mix_c);
		weft_wg_wait(&mix_receivers);
		for (int i = 0; i < nt; i++)
			pthread_join(t[i], NULL);
		long total = (long)MIX_SEND * MIX_N;
		CHECK(mix_count == total);
		CHECK(mix_sum == total * (total + 1) / 2);
		weft_chan_free(mix_c);
	}
	return 0;
}

Test(chan, gs_and_plain_threads, .timeout = 60)
{
	run_main(gs_and_threads);
}

/* Plain threads only: the runtime is not even needed as a go-between. */
static weft_chan_t *pp_c;

static void *pp_producer(void *arg)
{
	(void)arg;
	for (long i = 1; i <= 10000; i++)
		weft_chan_send(pp_c, &i);
	weft_chan_close(pp_c);
	return NULL;
}

Test(chan, plain_threads_only)
{
	pp_c = weft_chan_make(sizeof(long), 0);
	pthread_t t;
	pthread_create(&t, NULL, pp_producer, NULL);
	long v, sum = 0;
	while (weft_chan_recv(pp_c, &v) == 1)
		sum += v;
	pthread_join(t, NULL);
	cr_assert_eq(sum, 10000L * 10001 / 2);
	weft_chan_free(pp_c);
}

/* Happens-before: what the sender wrote before sending is visible to
 * the receiver after receiving (run across Ps). */
#define HB_N 20000
static weft_chan_t *hb_c;
static long hb_data[HB_N];

static void hb_writer(void *arg)
{
	(void)arg;
	for (long i = 0; i < HB_N; i++) {
		hb_data[i] = i * 3 + 1; /* plain store, published by the send */
		long *p = &hb_data[i];
		weft_chan_send(hb_c, &p);
	}
}

static int happens_before(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	hb_c = weft_chan_make(sizeof(long *), 1);
	weft_go(hb_writer, NULL);
	for (long i = 0; i < HB_N; i++) {
		long *p;
		weft_chan_recv(hb_c, &p);
		CHECK(*p == i * 3 + 1);
	}
	return 0;
}

Test(chan, happens_before)
{
	run_main(happens_before);
}

/* FIFO per sender on a buffered channel under contention: several
 * senders (Gs and threads) and receivers, with selects mixed in; each
 * receiver must see every sender's sequence numbers in increasing order,
 * and every message arrives exactly once. */
#define FF_SENDERS 4
#define FF_RECEIVERS 3
#define FF_N 30000
static weft_chan_t *ff_c;
static weft_wg_t ff_snd = WEFT_WG_INIT, ff_rcv = WEFT_WG_INIT;
static long ff_total, ff_sum;

static void ff_send(void *arg)
{
	long id = (long)(intptr_t)arg;
	for (long s = 1; s <= FF_N; s++) {
		long v = id << 32 | s;
		if (s % 3 == 0) {
			weft_case_t cs = { ff_c, WEFT_SEND, &v, 0 };
			CHECK(weft_select(&cs, 1, -1) == 0 && cs.ok == 1);
		} else {
			CHECK(weft_chan_send(ff_c, &v) == 0);
		}
	}
	weft_wg_done(&ff_snd);
}

static void ff_recv(void *arg)
{
	(void)arg;
	long last[FF_SENDERS] = { 0 }, v, n = 0, sum = 0;
	for (;;) {
		int got;
		if (n % 2) {
			weft_case_t cs = { ff_c, WEFT_RECV, &v, 0 };
			CHECK(weft_select(&cs, 1, -1) == 0);
			got = cs.ok;
		} else {
			got = weft_chan_recv(ff_c, &v);
		}
		if (got != 1)
			break;
		long id = v >> 32, s = v & 0xffffffff;
		CHECK(id >= 0 && id < FF_SENDERS);
		if (id >= 0 && id < FF_SENDERS) {
			CHECK(s > last[id]);
			last[id] = s;
		}
		n++;
		sum += s;
	}
	__atomic_fetch_add(&ff_total, n, __ATOMIC_RELAXED);
	__atomic_fetch_add(&ff_sum, sum, __ATOMIC_RELAXED);
	weft_wg_done(&ff_rcv);
}

static void *ff_thread(void *arg)
{
	intptr_t a = (intptr_t)arg;
	if (a < 0)
		ff_recv(NULL);
	else
		ff_send((void *)a);
	return NULL;
}

static int buffered_fifo_contended(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	for (size_t cap = 1; cap <= 64; cap *= 8) {
		ff_c = weft_chan_make(sizeof(long), cap);
		ff_total = ff_sum = 0;
		weft_wg_add(&ff_snd, FF_SENDERS);
		weft_wg_add(&ff_rcv, FF_RECEIVERS);
		pthread_t ts, tr;
		pthread_create(&ts, NULL, ff_thread, (void *)0);
		for (intptr_t i = 1; i < FF_SENDERS; i++)
			weft_go(ff_send, (void *)i);
		pthread_create(&tr, NULL, ff_thread, (void *)-1);
		for (int i = 1; i < FF_RECEIVERS; i++)
			weft_go(ff_recv, NULL);
		weft_wg_wait(&ff_snd);
		CHECK(weft_chan_close(ff_c) == 0);
		weft_wg_wait(&ff_rcv);
		pthread_join(ts, NULL);
		pthread_join(tr, NULL);
		CHECK(ff_total == (long)FF_SENDERS * FF_N);
		CHECK(ff_sum == (long)FF_SENDERS * FF_N * (FF_N + 1) / 2);
		CHECK(weft_chan_len(ff_c) == 0);
		weft_chan_free(ff_c);
	}
	return 0;
}

Test(chan, buffered_fifo_contended, .timeout = 60)
{
	run_main(buffered_fifo_contended);
}

/* close while senders are blocked on a full buffer: they all fail with
 * EPIPE, and receivers still drain what was buffered before close */
static weft_chan_t *cf_c;
static int cf_epipe;
static weft_wg_t cf_wg = WEFT_WG_INIT;

static void cf_sender(void *arg)
{
	long v = (long)(intptr_t)arg;
	if (weft_chan_send(cf_c, &v) == -1 && err() == EPIPE)
		__atomic_fetch_add(&cf_epipe, 1, __ATOMIC_RELAXED);
	weft_wg_done(&cf_wg);
}

static int close_full_buffer(int argc, char **argv)
{
	(void)argc, (void)argv;
	cf_c = weft_chan_make(sizeof(long), 4);
	for (long i = 0; i < 4; i++)
		weft_chan_send(cf_c, &i);
	weft_wg_add(&cf_wg, 10);
	for (long i = 0; i < 10; i++)
		weft_go(cf_sender, (void *)(intptr_t)(100 + i));
	weft_sleep(20 * 1000 * 1000);
	CHECK(weft_chan_len(cf_c) == 4);
	CHECK(weft_chan_close(cf_c) == 0);
	weft_wg_wait(&cf_wg);
	CHECK(cf_epipe == 10);
	long v;
	for (long i = 0; i < 4; i++)
		CHECK(weft_chan_recv(cf_c, &v) == 1 && v == i);
	CHECK(weft_chan_recv(cf_c, &v) == 0 && v == 0);
	return 0;
}

Test(chan, close_with_full_buffer)
{
	run_main(close_full_buffer);
}

/* ---- unbuffered: the rendezvous word (lock-free hand-offs) ------------------ */

static int64_t fast_handoffs(void)
{
	weft_stats_t st;
	CHECK(weft_stats(&st) == 0); /* on a G: no cr_assert (check.h) */
	return st.chan_fast_handoffs;
}

/* Two Gs ping-pong on one P: every hand-off but the locked path's goes
 * through the word (one party waits alone, no select, not closed). */
#define FH_N 10000
static weft_chan_t *fh_ping, *fh_pong;

static void fh_echo(void *arg)
{
	(void)arg;
	long v;
	while (weft_chan_recv(fh_ping, &v) == 1)
		CHECK(weft_chan_send(fh_pong, &v) == 0);
	weft_chan_close(fh_pong);
}

static int fast_handoff(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(1);
	fh_ping = weft_chan_make(sizeof(long), 0);
	fh_pong = weft_chan_make(sizeof(long), 0);
	weft_go(fh_echo, NULL);
	int64_t before = fast_handoffs();
	for (long i = 0; i < FH_N; i++) {
		long v = i * 7;
		CHECK(weft_chan_send(fh_ping, &v) == 0);
		v = -1;
		CHECK(weft_chan_recv(fh_pong, &v) == 1 && v == i * 7);
	}
	int64_t made = fast_handoffs() - before;
	CHECK(made >= 2 * FH_N - 2);
	if (made < 2 * FH_N - 2)
		fprintf(stderr, "fast hand-offs %lld of %d\n", (long long)made, 2 * FH_N);
	weft_chan_close(fh_ping);
	long v;
	CHECK(weft_chan_recv(fh_pong, &v) == 0);
	return 0;
}

Test(chan, fast_handoff_counted)
{
	run_main(fast_handoff);
}

/* The taking half of a hand-off inline (weft_chan_send/recv): every
 * element size, those it copies inline (0, 4, 8, 16) and those it
 * leaves to the general path (1, 3, 24), and a receive into NULL, with
 * each side taking as often as parking (a ping-pong on one P); the bytes
 * arrive whole, a NULL receive copies nothing, and the inline sizes'
 * hand-offs are all fast ones. */
#define ES_N 200
static weft_chan_t *es_ping, *es_pong;
static size_t es_size;

static void es_fill(unsigned char *b, size_t n, long i)
{
	for (size_t k = 0; k < n; k++)
		b[k] = (unsigned char)(i * 31 + (long)k * 7 + 1);
}

static bool es_same(const unsigned char *b, size_t n, long i)
{
	unsigned char want[32];
	es_fill(want, n, i);
	return memcmp(b, want, n) == 0;
}

static void es_echo(void *arg)
{
	(void)arg;
	unsigned char b[32];
	for (long i = 0;; i++) {
		memset(b, 0xee, sizeof b);
		/* every 5th element is dropped on the way in (NULL) */
		if (i % 5 == 4 && es_size) {
			if (weft_chan_recv(es_ping, NULL) != 1)
				break;
			es_fill(b, es_size, i);
		} else {
			if (weft_chan_recv(es_ping, es_size ? b : NULL) != 1)
				break;
			CHECK(es_same(b, es_size, i));
			CHECK(b[es_size] == 0xee); /* no byte beyond the element */
		}
		CHECK(weft_chan_send(es_pong, es_size ? b : NULL) == 0);
	}
	weft_chan_close(es_pong);
}

static int elem_sizes(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(1);
	static const size_t sizes[] = { 0, 4, 8, 16, 1, 3, 24 };
	for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
		es_size = sizes[s];
		es_ping = weft_chan_make(es_size, 0);
		es_pong = weft_chan_make(es_size, 0);
		CHECK(weft_go(es_echo, NULL) >= 0);
		int64_t before = fast_handoffs();
		unsigned char b[32];
		for (long i = 0; i < ES_N; i++) {
			es_fill(b, es_size, i);
			CHECK(weft_chan_send(es_ping, es_size ? b : NULL) == 0);
			memset(b, 0xee, sizeof b);
			CHECK(weft_chan_recv(es_pong, es_size ? b : NULL) == 1);
			CHECK(es_same(b, es_size, i));
			CHECK(b[es_size] == 0xee);
		}
		int64_t made = fast_handoffs() - before;
		/* as fast_handoff: every hand-off but the first two, whatever the
		 * size (the general path's word take counts too) */
		CHECK(made >= 2 * ES_N - 2);
		weft_chan_close(es_ping);
		CHECK(weft_chan_recv(es_pong, es_size ? b : NULL) == 0);
		weft_chan_free(es_ping);
		weft_chan_free(es_pong);
	}
	return 0;
}

Test(chan, handoff_elem_sizes)
{
	run_main(elem_sizes);
}

/* close racing parks through the word: on 2 Ps, receivers and senders
 * park on a fresh channel (the first through the word, the rest queued
 * after a seal) while another G closes it at a varying moment; every
 * blocked party returns exactly once, receivers 0 with the element
 * zeroed or a value some sender sent, senders 0 or EPIPE, and the
 * values taken match the sends that succeeded. */
#define CR_ROUNDS (TEST_TSAN ? 300 : 3000)
static weft_chan_t *cr_c;
static weft_wg_t cr_wg = WEFT_WG_INIT;
static long cr_sent, cr_got, cr_returned;

static void cr_recv(void *arg)
{
	(void)arg;
	long v = 77;
	int r = weft_chan_recv(cr_c, &v);
	CHECK(r == 0 || r == 1);
	if (r == 0)
		CHECK(v == 0);
	else
		__atomic_fetch_add(&cr_got, v, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cr_returned, 1, __ATOMIC_RELAXED);
	weft_wg_done(&cr_wg);
}

static void cr_send(void *arg)
{
	long v = (long)(intptr_t)arg;
	int r = weft_chan_send(cr_c, &v);
	CHECK(r == 0 || (r == -1 && err() == EPIPE));
	if (r == 0)
		__atomic_fetch_add(&cr_sent, v, __ATOMIC_RELAXED);
	__atomic_fetch_add(&cr_returned, 1, __ATOMIC_RELAXED);
	weft_wg_done(&cr_wg);
}

static void cr_closer(void *arg)
{
	int spins = (int)(intptr_t)arg;
	for (int i = 0; i < spins; i++)
		weft_yield();
	CHECK(weft_chan_close(cr_c) == 0);
	weft_wg_done(&cr_wg);
}

static int close_race(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	for (int round = 0; round < CR_ROUNDS; round++) {
		cr_c = weft_chan_make(sizeof(long), 0);
		cr_sent = cr_got = cr_returned = 0;
		int nr = 1 + round % 3, ns = round % 4; /* one side alone, or both */
		weft_wg_add(&cr_wg, nr + ns + 1);
		for (int i = 0; i < nr; i++)
			weft_go(cr_recv, NULL);
		weft_go(cr_closer, (void *)(intptr_t)(round % 5));
		for (int i = 0; i < ns; i++)
			weft_go(cr_send, (void *)(intptr_t)(100 + i));
		weft_wg_wait(&cr_wg);
		CHECK(cr_returned == nr + ns);
		CHECK(cr_got == cr_sent);
		weft_chan_free(cr_c);
	}
	return 0;
}

Test(chan, close_races_fast_park, .timeout = 60)
{
	run_main(close_race);
}

/* select and a party parked through the word, on one P (so the order
 * is known: a spawned G runs when main yields, and parks before main
 * runs again): a select takes a sender (and a receiver) parked so, a
 * plain send finds a parked select, and afterwards the word is back in
 * use (the select's seal was lifted).  The selects block rather than
 * poll: under TSan sysmon may lend a spare P to a slow main and the
 * spawned G then parks later, which must work too (through the seal). */
static weft_chan_t *sf_c, *sf_d;
static int sf_received;

static void sf_sender(void *arg)
{
	long v = (long)(intptr_t)arg;
	CHECK(weft_chan_send(sf_c, &v) == 0);
}

static void sf_receiver(void *arg)
{
	(void)arg;
	long v = -1;
	CHECK(weft_chan_recv(sf_c, &v) == 1 && v == 55);
	__atomic_store_n(&sf_received, 1, __ATOMIC_RELEASE);
}

static void sf_late_sender(void *arg)
{
	(void)arg;
	long v = 66;
	CHECK(weft_chan_send(sf_c, &v) == 0); /* the select waits, queued */
}

static int select_fast(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(1);
	sf_c = weft_chan_make(sizeof(long), 0);
	sf_d = weft_chan_make(sizeof(long), 0);
	/* a sender parked in the word; select receives from it */
	weft_go(sf_sender, (void *)(intptr_t)44);
	weft_yield();
	long v = -1, w = -1;
	weft_case_t rc[2] = { { sf_d, WEFT_RECV, &w, 0 }, { sf_c, WEFT_RECV, &v, 0 } };
	CHECK(weft_select(rc, 2, -1) == 1 && rc[1].ok == 1 && v == 44);
	/* a receiver parked in the word; select sends to it */
	weft_go(sf_receiver, NULL);
	weft_yield();
	long out = 55;
	weft_case_t sc[2] = { { sf_d, WEFT_SEND, &out, 0 }, { sf_c, WEFT_SEND, &out, 0 } };
	CHECK(weft_select(sc, 2, -1) == 1 && sc[1].ok == 1);
	while (!__atomic_load_n(&sf_received, __ATOMIC_ACQUIRE))
		weft_yield(); /* the receiver checks and ends */
	/* a select parked (queued, the word sealed); a plain send finds it */
	weft_go(sf_late_sender, NULL);
	v = -1;
	CHECK(weft_select(rc, 2, -1) == 1 && rc[1].ok == 1 && v == 66);
	/* nobody waits: the word is open again, and used */
	int64_t before = fast_handoffs();
	weft_go(sf_sender, (void *)(intptr_t)77);
	weft_yield();
	v = -1;
	CHECK(weft_chan_recv(sf_c, &v) == 1 && v == 77);
	CHECK(fast_handoffs() == before + 1);
	/* and a trysend finds no receiver without the lock */
	CHECK(weft_chan_trysend(sf_c, &out) == -1 && err() == EAGAIN);
	return 0;
}

Test(select, fast_path_parties)
{
	run_main(select_fast);
}

/* 1,000 Gs ping-ponging in pairs on 2 Ps, every value checked, plus
 * all of them on one shared pair of channels (many waiters: seals and
 * unseals all the time). */
#define PP_PAIRS 500
#define PP_TRIPS (TEST_TSAN ? 40 : 400)
struct pp_pair {
	weft_chan_t *a, *b;
};
static struct pp_pair pp_pairs[PP_PAIRS];
static weft_wg_t pp_wg = WEFT_WG_INIT;

static void pp_left(void *arg)
{
	struct pp_pair *p = arg;
	for (long i = 0; i < PP_TRIPS; i++) {
		long v = i * 3 + 1;
		CHECK(weft_chan_send(p->a, &v) == 0);
		v = -1;
		CHECK(weft_chan_recv(p->b, &v) == 1 && v == i * 3 + 2);
	}
	weft_wg_done(&pp_wg);
}

static void pp_right(void *arg)
{
	struct pp_pair *p = arg;
	for (long i = 0; i < PP_TRIPS; i++) {
		long v = -1;
		CHECK(weft_chan_recv(p->a, &v) == 1 && v == i * 3 + 1);
		v = i * 3 + 2;
		CHECK(weft_chan_send(p->b, &v) == 0);
	}
	weft_wg_done(&pp_wg);
}

static weft_chan_t *ps_req, *ps_rep;
static weft_wg_t ps_clients = WEFT_WG_INIT;
static long ps_sum;

static void ps_client(void *arg)
{
	long id = (long)(intptr_t)arg;
	for (long i = 0; i < PP_TRIPS / 4; i++) {
		long v = id << 20 | i;
		CHECK(weft_chan_send(ps_req, &v) == 0);
		long r = -1;
		CHECK(weft_chan_recv(ps_rep, &r) == 1 && r >= 0);
		__atomic_fetch_add(&ps_sum, r, __ATOMIC_RELAXED);
	}
	weft_wg_done(&ps_clients);
}

static void ps_server(void *arg)
{
	(void)arg;
	long v;
	while (weft_chan_recv(ps_req, &v) == 1) {
		long r = v & 0xfffff;
		CHECK(weft_chan_send(ps_rep, &r) == 0);
	}
	weft_wg_done(&pp_wg);
}

static int pingpong_many(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	weft_wg_add(&pp_wg, 2 * PP_PAIRS);
	for (int i = 0; i < PP_PAIRS; i++) {
		pp_pairs[i].a = weft_chan_make(sizeof(long), 0);
		pp_pairs[i].b = weft_chan_make(sizeof(long), 0);
		weft_go(pp_left, &pp_pairs[i]);
		weft_go(pp_right, &pp_pairs[i]);
	}
	weft_wg_wait(&pp_wg);
	for (int i = 0; i < PP_PAIRS; i++) {
		weft_chan_free(pp_pairs[i].a);
		weft_chan_free(pp_pairs[i].b);
	}
	/* shared: 990 clients, 10 servers, replies to whichever client */
	ps_req = weft_chan_make(sizeof(long), 0);
	ps_rep = weft_chan_make(sizeof(long), 0);
	weft_wg_add(&ps_clients, 990);
	for (long i = 0; i < 990; i++)
		weft_go(ps_client, (void *)(intptr_t)i);
	weft_wg_add(&pp_wg, 10);
	for (int i = 0; i < 10; i++)
		weft_go(ps_server, NULL);
	weft_wg_wait(&ps_clients);
	weft_chan_close(ps_req);
	weft_wg_wait(&pp_wg);
	/* every reply is some request's i: the sums match */
	CHECK(ps_sum == 990L * ((PP_TRIPS / 4) * (PP_TRIPS / 4 - 1) / 2));
	weft_chan_free(ps_req);
	weft_chan_free(ps_rep);
	return 0;
}

Test(chan, pingpong_1000_gs_2_ps, .timeout = 120)
{
	run_main(pingpong_many);
}
