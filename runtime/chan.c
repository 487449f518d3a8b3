/*
 * chan.c - channels and select, with Go's semantics (runtime/chan.go,
 * select.go), on the one park/ready protocol of sema.c.
 *
 * A channel is a lock, a ring buffer of cap elements, and two FIFO
 * queues of blocked parties (struct waiter): receivers and senders.
 * Invariants, under c->lock:
 *   - recvq non-empty implies the buffer is empty (a receiver only
 *     blocks when there is nothing to take);
 *   - sendq non-empty implies the buffer is full (cap 0: always "full");
 *   - closed never goes back to 0, and once closed both queues stay
 *     empty (close wakes everyone; nobody queues on a closed channel).
 * A party that finds a counterpart queued takes it with waiter_claim
 * under the lock, copies the element straight from or to the
 * counterpart's own memory (unbuffered: sender's buffer to receiver's
 * slot, no intermediate copy), records the outcome, and wakes it after
 * dropping the lock.  Once claimed, the counterpart cannot return (it
 * sleeps until woken), so its memory stays valid for the copy.
 *
 * Select queues one node per case (a struct waiter on the G's stack)
 * whose ->sel points at the shared record holding the one waiter that
 * actually blocks; a waker claims that shared waiter, so the first
 * channel to fire wins and the others find the claim taken and drop the
 * stale node.  Happens-before: every transfer is made under the
 * channel's lock or (direct hand-over) between a claim (acq_rel) and a
 * wake (release), and the woken party reads after it wakes (acquire).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "waitq.h"

struct weft_chan {
	struct lock lock;
	uint32_t closed;  /* 0 or 1; set under lock */
	size_t elemsize;
	size_t cap;       /* buffer slots; 0 = unbuffered */
	size_t count;     /* buffered elements; atomic only for weft_chan_len */
	size_t sendx;     /* next slot to fill */
	size_t recvx;     /* next slot to drain */
	struct waitq recvq;
	struct waitq sendq;
	char buf[];       /* cap * elemsize bytes */
};

/* A select in progress: the one waiter that blocks for all its cases,
 * and what the winning waker recorded. */
struct selrec {
	struct waiter w;
	int fired;        /* index of the case that fired */
	int ok;           /* its weft_case_t.ok */
};

#define MAXCASES 65536

/* Record the outcome for a claimed node; the caller wakes it later. */
static inline void finish(struct waiter *w, int ok)
{
	struct selrec *s = w->sel;
	if (s) {
		s->fired = (int)w->ticket;
		s->ok = ok;
	} else {
		w->result = ok;
	}
}

static inline void wake(struct waiter *w)
{
	waiter_wake(waiter_sleeper(w));
}

/* ---- element copies ---------------------------------------------------- */

/* Constant sizes let the compiler inline the common cases. */
static inline void elemcopy(void *dst, const void *src, size_t n)
{
	switch (n) {
	case 0: break;
	case 4: memcpy(dst, src, 4); break;
	case 8: memcpy(dst, src, 8); break;
	case 16: memcpy(dst, src, 16); break;
	default: memcpy(dst, src, n); break;
	}
}

static inline void elemzero(void *dst, size_t n)
{
	if (dst && n)
		memset(dst, 0, n);
}

static inline char *slot(struct weft_chan *c, size_t i)
{
	return c->buf + i * c->elemsize;
}

static inline void setcount(struct weft_chan *c, size_t n)
{
	/* relaxed: the lock orders it; weft_chan_len only wants a snapshot */
	__atomic_store_n(&c->count, n, __ATOMIC_RELAXED);
}

/* ---- the operations, with c->lock held on entry ------------------------
 * Each either completes (and unlocks) or returns -EAGAIN with the lock
 * still held, so a blocking caller can queue itself without a window. */

/* Send to a claimed receiver: copy straight into its slot. */
static void send_direct(struct weft_chan *c, struct waiter *r, const void *elem)
{
	unlock(&c->lock);
	if (r->elem)
		elemcopy(r->elem, elem, c->elemsize);
	finish(r, 1);
	wake(r);
}

/* 0 sent, -EPIPE closed, -EAGAIN would block (lock kept). */
static int trysend_locked(struct weft_chan *c, const void *elem)
{
	if (c->closed) {
		unlock(&c->lock);
		return -EPIPE;
	}
	struct waiter *r = waitq_claim(&c->recvq);
	if (r) {
		send_direct(c, r, elem);
		return 0;
	}
	if (c->count < c->cap) {
		elemcopy(slot(c, c->sendx), elem, c->elemsize);
		if (++c->sendx == c->cap)
			c->sendx = 0;
		setcount(c, c->count + 1);
		unlock(&c->lock);
		return 0;
	}
	return -EAGAIN;
}

/* Take from a claimed sender.  Unbuffered: straight from its memory.
 * Buffered (so full): take the head of the ring and put the sender's
 * element at its tail, which is the same slot; FIFO order holds. */
static void recv_from_sender(struct weft_chan *c, struct waiter *s, void *elem)
{
	if (c->cap == 0) {
		unlock(&c->lock);
		if (elem)
			elemcopy(elem, s->elem, c->elemsize);
	} else {
		char *p = slot(c, c->recvx);
		if (elem)
			elemcopy(elem, p, c->elemsize);
		elemcopy(p, s->elem, c->elemsize);
		if (++c->recvx == c->cap)
			c->recvx = 0;
		c->sendx = c->recvx;
		unlock(&c->lock);
	}
	finish(s, 1);
	wake(s);
}

/* 1 got a value, 0 closed and drained, -EAGAIN would block (lock kept). */
static int tryrecv_locked(struct weft_chan *c, void *elem)
{
	struct waiter *s = waitq_claim(&c->sendq);
	if (s) {
		recv_from_sender(c, s, elem);
		return 1;
	}
	if (c->count > 0) {
		if (elem)
			elemcopy(elem, slot(c, c->recvx), c->elemsize);
		if (++c->recvx == c->cap)
			c->recvx = 0;
		setcount(c, c->count - 1);
		unlock(&c->lock);
		return 1;
	}
	if (c->closed) {
		unlock(&c->lock);
		elemzero(elem, c->elemsize);
		return 0;
	}
	return -EAGAIN;
}

static void unlockchan(void *arg)
{
	unlock(&((struct weft_chan *)arg)->lock);
}

/* ---- public: make, send, receive, close ------------------------------- */

weft_chan_t *weft_chan_make(size_t elem_size, size_t cap)
{
	if (elem_size && cap > (SIZE_MAX - sizeof(struct weft_chan)) / elem_size) {
		errno = EINVAL;
		return NULL;
	}
	rt_enter(); /* the P's allocation cache, on a G */
	struct weft_chan *c = rtalloc(sizeof *c + elem_size * cap);
	rt_leave();
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->elemsize = elem_size;
	c->cap = cap;
	return c;
}

void weft_chan_free(weft_chan_t *c)
{
	if (!c)
		return;
	lock(&c->lock);
	bool busy = c->recvq.head || c->sendq.head;
	unlock(&c->lock);
	if (busy)
		fatal("weft_chan_free: a green thread or thread is blocked on the channel");
	rt_enter();
	rtfree(c);
	rt_leave();
}

/* rt_enter before the lock: the P must be held (P_RUNNING, which
 * sysmon never retakes) by the time we might park or ready someone with
 * the lock held, or re-acquiring it could block this M inside the
 * critical section. */
int weft_chan_send(weft_chan_t *c, const void *elem)
{
	if (unlikely(!c)) {
		errno = EINVAL;
		return -1;
	}
	rt_enter();
	lock(&c->lock);
	int r = trysend_locked(c, elem);
	if (r == -EAGAIN) {
		struct waiter w;
		waiter_init(&w);
		w.elem = (void *)elem;
		waitq_push(&c->sendq, &w);
		waiter_block(&w, unlockchan, c, W_CHAN_SEND, -1);
		r = w.result == 1 ? 0 : -EPIPE; /* woken by a receiver or by close */
	}
	rt_leave();
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

int weft_chan_recv(weft_chan_t *c, void *elem)
{
	if (unlikely(!c)) {
		errno = EINVAL;
		return -1;
	}
	rt_enter();
	lock(&c->lock);
	int r = tryrecv_locked(c, elem);
	if (r == -EAGAIN) {
		struct waiter w;
		waiter_init(&w);
		w.elem = elem;
		waitq_push(&c->recvq, &w);
		waiter_block(&w, unlockchan, c, W_CHAN_RECV, -1);
		r = w.result;
		if (r == 0)
			elemzero(elem, c->elemsize); /* woken by close */
	}
	rt_leave();
	return r;
}

int weft_chan_trysend(weft_chan_t *c, const void *elem)
{
	if (unlikely(!c)) {
		errno = EINVAL;
		return -1;
	}
	rt_enter();
	lock(&c->lock);
	int r = trysend_locked(c, elem);
	if (r == -EAGAIN)
		unlock(&c->lock);
	rt_leave();
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return 0;
}

int weft_chan_tryrecv(weft_chan_t *c, void *elem)
{
	if (unlikely(!c)) {
		errno = EINVAL;
		return -1;
	}
	rt_enter();
	lock(&c->lock);
	int r = tryrecv_locked(c, elem);
	if (r == -EAGAIN)
		unlock(&c->lock);
	rt_leave();
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

/* Claim everyone queued on q, recording ok, onto the wake list. */
static struct waiter *claimall(struct waitq *q, int ok, struct waiter *list)
{
	struct waiter *w;
	while ((w = waitq_claim(q))) {
		finish(w, ok);
		w->next = list; /* ours now: it sleeps until we wake it */
		list = w;
	}
	return list;
}

int weft_chan_close(weft_chan_t *c)
{
	if (unlikely(!c)) {
		errno = EINVAL;
		return -1;
	}
	rt_enter();
	lock(&c->lock);
	if (c->closed) {
		unlock(&c->lock);
		rt_leave();
		errno = EPIPE;
		return -1;
	}
	c->closed = 1;
	/* receivers get 0 (the buffer is empty if any wait), senders EPIPE */
	struct waiter *list = claimall(&c->recvq, 0, NULL);
	list = claimall(&c->sendq, -1, list);
	unlock(&c->lock);
	while (list) {
		struct waiter *w = list;
		list = w->next;
		wake(w);
	}
	rt_leave();
	return 0;
}

size_t weft_chan_len(weft_chan_t *c)
{
	return c ? __atomic_load_n(&c->count, __ATOMIC_RELAXED) : 0;
}

size_t weft_chan_cap(weft_chan_t *c)
{
	return c ? c->cap : 0;
}

/* ---- select ------------------------------------------------------------- */

struct selstate {
	weft_case_t *cases;
	size_t n;
	struct weft_chan **locks; /* distinct channels in address order */
	size_t nlocks;
	uint32_t *order;          /* poll order: a random permutation of live cases */
	size_t norder;
	struct waiter *nodes;     /* one queue node per case */
};

static void lockall(struct selstate *st)
{
	for (size_t i = 0; i < st->nlocks; i++)
		lock(&st->locks[i]->lock);
}

/* In reverse, and skipping one channel already unlocked (or NULL). */
static void unlockall_but(struct selstate *st, struct weft_chan *skip)
{
	for (size_t i = st->nlocks; i-- > 0;)
		if (st->locks[i] != skip)
			unlock(&st->locks[i]->lock);
}

static void unlockall(void *arg)
{
	unlockall_but(arg, NULL);
}

/* Distinct non-NULL channels, sorted by address: every select locks in
 * this global order, so two selects never deadlock on each other. */
static void sortlocks(struct selstate *st)
{
	size_t k = 0;
	for (size_t i = 0; i < st->n; i++) {
		struct weft_chan *c = st->cases[i].chan;
		if (!c)
			continue;
		size_t j = k;
		while (j > 0 && st->locks[j - 1] > c)
			j--;
		if (j > 0 && st->locks[j - 1] == c)
			continue; /* already there */
		memmove(&st->locks[j + 1], &st->locks[j], (k - j) * sizeof *st->locks);
		st->locks[j] = c;
		k++;
	}
	st->nlocks = k;
}

/* Fisher-Yates over the cases with a channel, so every ready case is
 * equally likely to be found first. */
static void shuffle(struct selstate *st)
{
	size_t k = 0;
	for (size_t i = 0; i < st->n; i++) {
		if (!st->cases[i].chan)
			continue;
		size_t j = fastrand() % (k + 1);
		st->order[k] = st->order[j];
		st->order[j] = (uint32_t)i;
		k++;
	}
	st->norder = k;
}

/* Try case i with every channel locked.  On success all locks are
 * released and ok is stored in the case; returns false if not ready. */
static bool selpoll(struct selstate *st, size_t i)
{
	weft_case_t *cs = &st->cases[i];
	struct weft_chan *c = cs->chan;
	if (cs->op == WEFT_RECV) {
		struct waiter *s = waitq_claim(&c->sendq);
		if (s) {
			/* recv_from_sender unlocks c itself */
			unlockall_but(st, c);
			recv_from_sender(c, s, cs->elem);
			cs->ok = 1;
			return true;
		}
		if (c->count == 0 && !c->closed)
			return false;
	} else {
		if (!c->closed) {
			struct waiter *r = waitq_claim(&c->recvq);
			if (r) {
				unlockall_but(st, c);
				send_direct(c, r, cs->elem);
				cs->ok = 1;
				return true;
			}
			if (c->count == c->cap)
				return false;
		}
	}
	/* buffered data, buffer room or closed: completes without waiting;
	 * the try* helpers unlock c */
	unlockall_but(st, c);
	int r = cs->op == WEFT_RECV ? tryrecv_locked(c, cs->elem) : trysend_locked(c, cs->elem);
	cs->ok = r == -EPIPE ? -1 : (cs->op == WEFT_RECV ? r : 1);
	return true;
}

/* Nothing was ready: queue a node on every case's channel and sleep
 * until one fires or the deadline passes.  Returns the case index or -1. */
static int selwait(struct selstate *st, int64_t deadline)
{
	struct selrec rec;
	waiter_init(&rec.w);
	rec.fired = -1;
	rec.ok = 0;
	/* in poll order: two cases on one channel queue in random order,
	 * so a counterpart taking the head picks either with equal odds */
	for (size_t k = 0; k < st->norder; k++) {
		uint32_t i = st->order[k];
		weft_case_t *cs = &st->cases[i];
		struct waiter *w = &st->nodes[i];
		memset(w, 0, sizeof *w);
		w->sel = &rec;
		w->ticket = i;
		w->elem = cs->elem;
		waitq_push(cs->op == WEFT_RECV ? &cs->chan->recvq : &cs->chan->sendq, w);
	}
	bool woken = waiter_block(&rec.w, unlockall, st, W_SELECT, deadline);
	/* take back the nodes no waker took: the winner's was dequeued by
	 * its waker, losers' may have been dropped by a failed claim */
	lockall(st);
	for (size_t i = 0; i < st->n; i++) {
		weft_case_t *cs = &st->cases[i];
		if (cs->chan && st->nodes[i].queued)
			waitq_remove(cs->op == WEFT_RECV ? &cs->chan->recvq : &cs->chan->sendq,
				      &st->nodes[i]);
	}
	unlockall(st);
	if (!woken)
		return -1;
	weft_case_t *cs = &st->cases[rec.fired];
	cs->ok = rec.ok;
	if (cs->op == WEFT_RECV && rec.ok == 0)
		elemzero(cs->elem, cs->chan->elemsize);
	return rec.fired;
}

/* Park for good, or until the deadline: select with no live case. */
static int selblock(int64_t deadline)
{
	struct waiter w;
	waiter_init(&w);
	while (waiter_block(&w, NULL, NULL, W_SELECT_NOCASES, deadline))
		waiter_init(&w); /* nobody wakes it; be safe anyway */
	errno = ETIMEDOUT;
	return -1;
}

#define SMALLSEL 8

int weft_select(weft_case_t *cases, size_t n, int64_t timeout_ns)
{
	if ((n && !cases) || n > MAXCASES || timeout_ns < -1) {
		errno = EINVAL;
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		if (cases[i].op != WEFT_SEND && cases[i].op != WEFT_RECV) {
			errno = EINVAL;
			return -1;
		}
	}
	int64_t deadline = timeout_ns > 0 ? nanotime() + timeout_ns : -1;

	struct weft_chan *locks_s[SMALLSEL];
	uint32_t order_s[SMALLSEL];
	struct waiter nodes_s[SMALLSEL];
	struct selstate st = { cases, n, locks_s, 0, order_s, 0, nodes_s };
	void *heap = NULL;
	if (n > SMALLSEL) {
		heap = rtalloc(n * (sizeof *st.locks + sizeof *st.order + sizeof *st.nodes));
		if (!heap) {
			errno = ENOMEM;
			return -1;
		}
		st.nodes = heap;
		st.locks = (struct weft_chan **)(st.nodes + n);
		st.order = (uint32_t *)(st.locks + n);
	}

	rt_enter();
	sortlocks(&st);
	shuffle(&st);
	int fired = -1;
	if (st.nlocks == 0) {
		if (timeout_ns != 0)
			selblock(deadline);
	} else {
		lockall(&st);
		for (size_t k = 0; k < st.norder && fired < 0; k++)
			if (selpoll(&st, st.order[k]))
				fired = (int)st.order[k];
		if (fired < 0) {
			if (timeout_ns == 0)
				unlockall(&st);
			else
				fired = selwait(&st, deadline);
		}
	}
	rt_leave();
	rtfree(heap);
	if (fired < 0)
		errno = ETIMEDOUT;
	return fired;
}
