/*
 * chan.c - channels and select, with Go's semantics (runtime/chan.go,
 * select.go), on the one park/ready protocol of sema.c.
 *
 * Every channel has a lock and two FIFO queues of blocked parties
 * (struct waiter): receivers and senders.  Beyond that there are two
 * kinds.
 *
 * Unbuffered (cap 0): a party that finds a counterpart waiting takes
 * it, copies the element straight between the two parties' own memory
 * (no intermediate copy), records the outcome and wakes it.  Once taken
 * the counterpart cannot return (it sleeps until woken), so its memory
 * stays valid for the copy.  The common case - one party waiting, no
 * select, not closed - takes no lock: the waiter sits in one word,
 * c->rdv (the rendezvous word, below), where it is published by one CAS
 * after its G has switched away and taken by one CAS.  Everything else
 * (a second waiter, select, close, plain threads that sleep) goes
 * through the lock and the two queues, after "sealing" the word: the
 * waiter it held moves to the head of its queue and the word says
 * RDV_SEALED until a lock holder leaves both queues empty again.
 * Invariants: at most one queue is non-empty, both are empty once
 * closed; a queue is non-empty or the channel closed only while the
 * word is sealed (so a word that is not sealed means: open, and its
 * waiter, if any, is the only one).
 *
 * Buffered (cap > 0): the elements live in a ring that senders and
 * receivers use without the lock (Vyukov's bounded queue: each slot
 * carries a stamp saying which lap may write or read it next; tail and
 * head advance by CAS).  Closing sets a mark bit in tail, so no send can
 * succeed after close.  The lock and queues are only for sleeping:
 *   - a receiver finding the ring empty locks, queues itself, counts
 *     itself in recvq.n (seq_cst), tries the ring again and only then
 *     sleeps; a sender, after its element is in the ring, reads recvq.n
 *     (seq_cst) and wakes a queued receiver if there is one.  Either the
 *     sender sees the count or the receiver's second try sees the tail
 *     the sender's CAS (seq_cst) moved: no wakeup is lost.  Full rings
 *     and blocked senders mirror this with sendq.n.
 *   - as in Go, a sender that finds a receiver queued and the ring
 *     empty hands its element to it directly (with elements still in the
 *     ring, one of them may be the sender's own earlier one: it goes
 *     through the ring, to keep order); a woken sender retries.
 *   - unlike Go, a party that would block first looks again a few times
 *     when the other side may be running on another CPU, and a party
 *     woken to retry goes to the back of the run queue, where an idle P
 *     steals it: producer and consumer then run in parallel instead of
 *     taking turns on one P.
 *
 * Select queues one node per case (a struct waiter on the G's stack)
 * whose ->sel points at the shared record holding the one waiter that
 * sleeps (waitq.h); a waker claims that shared waiter, so the first
 * channel to fire wins and the others find the claim taken and drop the
 * stale node.  A select woken only to retry (a buffered channel became
 * ready) polls again.  Happens-before: every transfer is made under the
 * channel's lock, between a claim (acq_rel) and a wake (release), or
 * through a slot stamp (release store, acquire load).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "waitq.h"

/* A queue of sleepers and, for buffered channels, its length for
 * lock-free "is anyone waiting?" checks (modified under the lock). */
struct wq {
	struct waitq q;
	_Atomic int32_t n;
};

struct weft_chan {
	/* CHAN_LIVE from make until free, then CHAN_FREED: a freed (or never
	 * made) channel passed in is EINVAL where its memory still says so */
	uint64_t magic;
	/* fixed at make */
	size_t elemsize;
	size_t cap;        /* ring slots; 0 = unbuffered */
	size_t slotsize;   /* stamp + element, 8-byte aligned */
	uint64_t markbit;  /* tail bit meaning closed; also the index range */
	uint64_t onelap;   /* what a wrap adds to an index */
	/* an unbuffered channel whose element the hand-off's fast path
	 * copies inline (elemfast): its size; else RDV_NOFAST (buffered,
	 * other sizes).  One field for RDV_TAKEFAST to test, on the line of
	 * the word */
	size_t rdvsize;
	/* unbuffered: the rendezvous word (RDV_*, "the rendezvous word") */
	_Atomic uintptr_t rdv;
	/* under lock */
	struct lock lock;
	uint32_t closed;   /* 0 or 1, set under lock (and the tail mark bit) */
	struct wq recvq;
	struct wq sendq;
	/* each on a cache line of its own, and the ring after them starts on
	 * one (the channel is allocated 64-aligned): a 16-byte slot never
	 * straddles two lines, which the receiver and the sender would then
	 * both write (an 8-byte shift of the ring cost chan_buffered a
	 * quarter of its throughput) */
	_Alignas(64) _Atomic uint64_t head; /* next slot to read (lap | index); receivers' line */
	_Alignas(64) _Atomic uint64_t tail; /* next slot to write (lap | mark | index); senders' line */
	_Alignas(64) char ring[]; /* the slots (cap > 0) */
};
_Static_assert(sizeof(struct weft_chan) % 64 == 0, "the ring starts on a cache line");

struct slot {
	_Atomic uint64_t stamp;
	/* element follows */
};

/* A select in progress: the one waiter that sleeps for all its cases
 * (first member: see waiter_sleeper), and what the waker recorded. */
struct selrec {
	struct waiter w;
	int fired;  /* index of the case that completed, if done */
	int ok;     /* its weft_case_t.ok */
	bool done;  /* the waker completed a case; else: poll again */
};

#define CHAN_LIVE 0x6e61686374666577ULL /* "weftchan" */
#define CHAN_FREED 0x6465657266ULL

/* Is c a channel (not NULL, not freed, as far as its memory tells)?
 * Every channel is 64-aligned (weft_chan_make): a pointer that is not is
 * none, and is not read as one (UBSan: a misaligned struct access). */
static inline bool chan_ok(const struct weft_chan *c)
{
	return likely(c != NULL) && likely(((uintptr_t)c & 63) == 0) &&
	       likely(c->magic == CHAN_LIVE);
}

/* The element sizes elemcopy_fast copies inline, with no call; c->rdvsize
 * otherwise (any size above 16). */
static inline bool elemfast(size_t n)
{
	return n == 8 || n == 4 || n == 16 || n == 0;
}
#define RDV_NOFAST SIZE_MAX

/* outcome a waker records for a plain (non-select) waiter */
enum { RES_CLOSED = 0, RES_VALUE = 1, RES_RETRY = 2, RES_EPIPE = -1 };

#define MAXCASES 65536

/* ---- small helpers ------------------------------------------------------- */

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

static inline void relax(int spins)
{
	if (spins < 64)
		cpu_relax();
	else
		osyield(); /* the slot's writer was descheduled mid-copy */
}

/* ---- wait queues (c->lock held) -------------------------------------------- */

static void wq_push(struct weft_chan *c, struct wq *q, struct waiter *w)
{
	waitq_push(&q->q, w);
	if (c->cap)
		atomic_fetch_add(&q->n, 1); /* seq_cst: see the file comment */
}

static void wq_remove(struct weft_chan *c, struct wq *q, struct waiter *w)
{
	waitq_remove(&q->q, w);
	if (c->cap)
		atomic_fetch_sub_explicit(&q->n, 1, memory_order_relaxed);
}

/* Dequeue the first node whose sleeper we can claim (waitq_claim, with
 * the count kept). */
static struct waiter *wq_claim(struct weft_chan *c, struct wq *q)
{
	struct waiter *w;
	while ((w = q->q.head)) {
		wq_remove(c, q, w);
		if (waiter_claim(waiter_sleeper(w)))
			return w;
	}
	return NULL;
}

/* ---- the rendezvous word (unbuffered channels) ------------------------------
 *
 * c->rdv is one of
 *   0               open, nobody waits (both queues empty)
 *   w | RDV_RECV    open, receiver w waits, alone (both queues empty)
 *   w | RDV_SEND    open, sender w waits, alone, w->elem its value
 *   RDV_SEALED      the lock and queues are in charge: waiters, if any,
 *                   are queued; or the channel is closed
 * where w is a struct waiter of a G (8-byte aligned: the low bits are
 * free) that no deadline, interruption or select can end (w->excl).
 *
 * Without the lock (usend, urecv, rdv_park):
 *   - a party finding a counterpart's w takes it with CAS(w|dir -> 0):
 *     the one CAS that wins owns w (as waiter_claim under a lock would),
 *     and reads w's fields only after it (acquire; an ABA - w ended and
 *     the same address waits again - is then simply the new wait);
 *   - a G that finds 0 parks: it switches away, and the context that
 *     runs next publishes it with CAS(0 -> w|dir) (park_publish; release:
 *     w's fields before a taker's acquire).  Published only once off its
 *     stack, it cannot be readied while still running on it.  If the CAS
 *     fails (a counterpart, a second waiter, a seal came first), nothing
 *     was published and the G is readied to look again.
 * No lost wake-up: a sleeper is published by a CAS on this one word and
 * every counterpart decides by a load or CAS of the same word.  In the
 * word's modification order a counterpart either comes after the
 * publication (and sees w) or before it (and then either took nothing
 * and parks itself: of two CAS from 0 one fails and its G looks again,
 * finding the other; or went to the locked path, whose seal made the
 * publication's CAS from 0 fail).  Coherence of one location is all
 * this needs: no fences.
 *
 * With the lock (chanlock): seal first.  The waiter the word held goes
 * to its queue (the queues were empty, so it is first in line, as it
 * came first), and from then on a fast party finds RDV_SEALED and takes
 * the lock too, a publication's CAS from 0 fails, and the channel is
 * exactly the locked one.  chanunlock unseals (a plain release store:
 * only a lock holder changes a sealed word) when both queues are empty
 * and the channel open; close never unseals. */
#define RDV_RECV ((uintptr_t)1)
#define RDV_SEND ((uintptr_t)2)
#define RDV_DIR ((uintptr_t)3)
#define RDV_SEALED RDV_DIR /* no waiter, both bits */

static inline struct waiter *rdv_waiter(uintptr_t x)
{
	return (struct waiter *)(x & ~RDV_DIR);
}

/* c->lock held: move the word's waiter (if any) to its queue and seal. */
static void rdv_seal(struct weft_chan *c)
{
	uintptr_t x = atomic_load_explicit(&c->rdv, memory_order_acquire);
	while (x != RDV_SEALED) {
		/* acquire: w's fields, written before its publication */
		if (atomic_compare_exchange_weak_explicit(&c->rdv, &x, RDV_SEALED,
							  memory_order_acquire,
							  memory_order_acquire)) {
			struct waiter *w = rdv_waiter(x);
			if (w)
				wq_push(c, (x & RDV_DIR) == RDV_RECV ? &c->recvq : &c->sendq, w);
			return;
		}
	}
}

static inline void chanlock(struct weft_chan *c)
{
	lock(&c->lock);
	if (!c->cap)
		rdv_seal(c);
}

static inline void chanunlock(struct weft_chan *c)
{
	/* release: what we did under the lock before a fast party's acquire */
	if (!c->cap && !c->closed && !c->recvq.q.head && !c->sendq.q.head)
		atomic_store_explicit(&c->rdv, 0, memory_order_release);
	unlock(&c->lock);
}

/* Record the outcome for a claimed node: a completed case (ok) or, with
 * retry, only "look again".  The caller wakes it afterwards. */
static inline void finish(struct waiter *w, int ok, bool retry)
{
	struct selrec *s = w->sel;
	if (s) {
		s->done = !retry;
		s->fired = (int)w->ticket;
		s->ok = ok;
	} else {
		w->result = retry ? RES_RETRY : ok;
	}
}

static inline void wake(struct waiter *w)
{
	waiter_wake(waiter_sleeper(w));
}

static void unlockchan(void *arg)
{
	chanunlock(arg);
}

/* ---- the ring (buffered channels), lock-free ------------------------------- */

enum { R_OK, R_BLOCK, R_CLOSED };

static inline struct slot *slotat(struct weft_chan *c, uint64_t pos)
{
	return (struct slot *)(c->ring + (pos & (c->markbit - 1)) * c->slotsize);
}

/* The position after pos: the next index, or index 0 of the next lap. */
static inline uint64_t nextpos(struct weft_chan *c, uint64_t pos)
{
	uint64_t idx = pos & (c->markbit - 1);
	return idx + 1 < c->cap ? pos + 1 : (pos & ~(c->onelap - 1)) + c->onelap;
}

/* A slot is writable at tail t when its stamp is t, readable at head h
 * when its stamp is h + 1; writing stamps it t + 1, reading h + onelap. */
static int ring_send(struct weft_chan *c, const void *elem)
{
	uint64_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
	for (int spins = 0;; spins++) {
		if (t & c->markbit)
			return R_CLOSED;
		struct slot *s = slotat(c, t);
		/* acquire: the reader of the previous lap is done with it */
		uint64_t stamp = atomic_load_explicit(&s->stamp, memory_order_acquire);
		if (stamp == t) {
			/* seq_cst: ordered before our read of nrecvq (no lost wakeup) */
			if (atomic_compare_exchange_weak_explicit(&c->tail, &t, nextpos(c, t),
								  memory_order_seq_cst,
								  memory_order_relaxed)) {
				elemcopy(s + 1, elem, c->elemsize);
				/* release: the element is written before a reader sees it */
				atomic_store_explicit(&s->stamp, t + 1, memory_order_release);
				return R_OK;
			}
			continue; /* t reloaded */
		}
		if (stamp + c->onelap == t + 1) {
			/* still holds the previous lap's element: full, unless
			 * head moved on meanwhile */
			atomic_thread_fence(memory_order_seq_cst);
			uint64_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
			if (h + c->onelap == t)
				return R_BLOCK;
		}
		relax(spins);
		t = atomic_load_explicit(&c->tail, memory_order_relaxed);
	}
}

static int ring_recv(struct weft_chan *c, void *elem)
{
	uint64_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
	for (int spins = 0;; spins++) {
		struct slot *s = slotat(c, h);
		/* acquire: pairs with the writer's release of the stamp */
		uint64_t stamp = atomic_load_explicit(&s->stamp, memory_order_acquire);
		if (stamp == h + 1) {
			/* seq_cst: ordered before our read of nsendq */
			if (atomic_compare_exchange_weak_explicit(&c->head, &h, nextpos(c, h),
								  memory_order_seq_cst,
								  memory_order_relaxed)) {
				if (elem)
					elemcopy(elem, s + 1, c->elemsize);
				/* release: done reading before a writer reuses it */
				atomic_store_explicit(&s->stamp, h + c->onelap, memory_order_release);
				return R_OK;
			}
			continue;
		}
		if (stamp == h) {
			/* not written this lap: empty, unless tail moved on */
			atomic_thread_fence(memory_order_seq_cst);
			uint64_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
			if ((t & ~c->markbit) == h)
				return t & c->markbit ? R_CLOSED : R_BLOCK;
		}
		relax(spins);
		h = atomic_load_explicit(&c->head, memory_order_relaxed);
	}
}

static size_t ring_len(struct weft_chan *c)
{
	for (;;) {
		uint64_t t = atomic_load(&c->tail);
		uint64_t h = atomic_load(&c->head);
		if (atomic_load(&c->tail) != t)
			continue;
		t &= ~c->markbit;
		uint64_t hi = h & (c->markbit - 1), ti = t & (c->markbit - 1);
		if (hi < ti)
			return ti - hi;
		if (hi > ti)
			return c->cap - hi + ti;
		return t == h ? 0 : c->cap;
	}
}

/* After a successful ring operation: wake one party queued on q to try
 * again.  The seq_cst load pairs with the sleeper's seq_cst count. */
static void notify(struct weft_chan *c, struct wq *q)
{
	if (atomic_load(&q->n) == 0)
		return;
	chanlock(c);
	struct waiter *w = wq_claim(c, q);
	chanunlock(c);
	if (!w)
		return;
	finish(w, 0, true);
	/* a G goes to the back of the queue, not runnext: the ring has room
	 * to keep both sides busy, so an idle P should steal it and run it
	 * in parallel rather than it waiting for us to block */
	struct waiter *s = waiter_sleeper(w);
	if (s->g)
		goready_tail(s->g);
	else
		waiter_wake(s);
}

/* Nothing buffered (every element sent so far has been taken). */
static bool ring_empty(struct weft_chan *c)
{
	uint64_t t = atomic_load(&c->tail);
	return (t & ~c->markbit) == atomic_load(&c->head);
}

/* Hand elem to a queued receiver of a buffered channel, as Go does for
 * a receiver waiting on an empty buffer.  False if none is queued, or if
 * the ring still holds elements: one of ours may be among them, and ours
 * must arrive in order (several receivers can be queued while the ring
 * fills, since each element wakes only one). */
static bool ring_handoff(struct weft_chan *c, const void *elem)
{
	if (atomic_load(&c->recvq.n) == 0 || !ring_empty(c))
		return false;
	chanlock(c);
	struct waiter *r = wq_claim(c, &c->recvq);
	chanunlock(c);
	if (!r)
		return false;
	if (r->elem)
		elemcopy(r->elem, elem, c->elemsize);
	finish(r, 1, false);
	wake(r);
	return true;
}

/* Before sleeping on a buffered channel, look again a few times: with
 * the other side running on another CPU, a sleep and wakeup (several
 * us) costs far more than the gap to the next element.  300 pauses take
 * some 5-15 us depending on the CPU: about what the sleep would cost,
 * so spinning first never costs more than twice the best choice. */
#define SPINS 10
#define SPINPAUSE 30

/* 0 sent, -EPIPE closed, -EAGAIN full and !block. */
static int bsend(struct weft_chan *c, const void *elem, bool block)
{
	int spun = 0;
	for (;;) {
		if (ring_handoff(c, elem))
			return 0;
		int r = ring_send(c, elem);
		if (r == R_OK) {
			notify(c, &c->recvq);
			return 0;
		}
		if (r == R_CLOSED)
			return -EPIPE;
		if (!block)
			return -EAGAIN;
		if (spun++ < SPINS && spin_worthwhile()) {
			spin_pause(SPINPAUSE); /* a receiver on another CPU may free a slot */
			continue;
		}
		chanlock(c);
		struct waiter w;
		waiter_init(&w);
		wq_push(c, &c->sendq, &w);
		r = ring_send(c, elem); /* again, now that receivers see us */
		if (r != R_BLOCK) {
			wq_remove(c, &c->sendq, &w);
			chanunlock(c);
			if (r == R_CLOSED)
				return -EPIPE;
			notify(c, &c->recvq);
			return 0;
		}
		waiter_block(&w, unlockchan, c, W_CHAN_SEND, -1);
		/* a receiver made room, or close: try again */
	}
}

/* 1 got a value, 0 closed and drained, -EAGAIN empty and !block. */
static int brecv(struct weft_chan *c, void *elem, bool block)
{
	int spun = 0;
	for (;;) {
		int r = ring_recv(c, elem);
		if (r == R_OK) {
			notify(c, &c->sendq);
			return 1;
		}
		if (r == R_CLOSED) {
			elemzero(elem, c->elemsize);
			return 0;
		}
		if (!block)
			return -EAGAIN;
		if (spun++ < SPINS && spin_worthwhile()) {
			spin_pause(SPINPAUSE); /* a sender on another CPU may be about to send */
			continue;
		}
		chanlock(c);
		struct waiter w;
		waiter_init(&w);
		w.elem = elem;
		wq_push(c, &c->recvq, &w);
		r = ring_recv(c, elem); /* again, now that senders see us */
		if (r != R_BLOCK) {
			wq_remove(c, &c->recvq, &w);
			chanunlock(c);
			if (r == R_CLOSED) {
				elemzero(elem, c->elemsize);
				return 0;
			}
			notify(c, &c->sendq);
			return 1;
		}
		waiter_block(&w, unlockchan, c, W_CHAN_RECV, -1);
		if (w.result == RES_VALUE)
			return 1; /* handed to us directly */
		/* a sender filled the ring, or close: try again */
	}
}

/* ---- unbuffered: rendezvous under the lock ----------------------------------
 * Each either completes (and unlocks) or returns -EAGAIN with the lock
 * still held, so a blocking caller can queue itself without a window. */

/* Send to a claimed receiver: copy straight into its slot. */
static void send_direct(struct weft_chan *c, struct waiter *r, const void *elem)
{
	chanunlock(c);
	if (r->elem)
		elemcopy(r->elem, elem, c->elemsize);
	finish(r, 1, false);
	wake(r);
}

/* Receive from a claimed sender: copy straight from its memory. */
static void recv_direct(struct weft_chan *c, struct waiter *s, void *elem)
{
	chanunlock(c);
	if (elem)
		elemcopy(elem, s->elem, c->elemsize);
	finish(s, 1, false);
	wake(s);
}

/* 0 sent, -EPIPE closed, -EAGAIN would block (lock kept). */
static int usend_locked(struct weft_chan *c, const void *elem)
{
	if (c->closed) {
		chanunlock(c);
		return -EPIPE;
	}
	struct waiter *r = wq_claim(c, &c->recvq);
	if (!r)
		return -EAGAIN;
	send_direct(c, r, elem);
	return 0;
}

/* 1 got a value, 0 closed, -EAGAIN would block (lock kept). */
static int urecv_locked(struct weft_chan *c, void *elem)
{
	struct waiter *s = wq_claim(c, &c->sendq);
	if (s) {
		recv_direct(c, s, elem);
		return 1;
	}
	if (c->closed) {
		chanunlock(c);
		elemzero(elem, c->elemsize);
		return 0;
	}
	return -EAGAIN;
}

/* ---- unbuffered: the lock-free rendezvous ---------------------------------- */

/* w was taken from the word (ours alone) by a party on m (NULL: a
 * plain thread): complete it with a value and wake it.  Its G sleeps
 * until the wake, so w stays valid.  A fast hand-off made, for
 * weft_stats: a counter of our P's (only its holder writes it, so a
 * load and a store, no RMW). */
static inline void rdv_done(struct waiter *w, struct m *m)
{
	w->result = RES_VALUE;
	waiter_claim_wake_gm(w, m);
	if (m && m->p)
		mtally(&m->p->nchanfast);
}

/* Park the running G as the word's waiter w (w->elem set by the caller).
 * True once a taker (or close, through the queue a seal put w on) has
 * completed it: w->result says how.  False if the word was not 0 when
 * the commit tried: look again. */
static bool rdv_park(struct weft_chan *c, struct m **mp, struct waiter *w, uintptr_t dir,
		     int reason)
{
	/* the commit publishes w in the word (release: w's fields before a
	 * taker's acquire CAS), after the switch: park_publish */
	struct parkpub pk = { &c->rdv, (uintptr_t)w | dir, true };
	*mp = gopark_g(*mp, w->g, park_publish, &pk, reason); /* perhaps another M now */
	if (!pk.parked)
		return false;
	/* acquire: pairs with the taker's release store in waiter_claim */
	(void)atomic_load_explicit(&w->g->waitstate, memory_order_acquire);
	return true;
}

/* Can gp (the running G, or NULL on a plain thread) park through the
 * word?  A G (a plain thread sleeps on a note: the locked path), whose
 * wait nothing but a counterpart or close may end (no interruption
 * asked for). */
static inline bool rdv_parker(struct g *gp)
{
	return gp && !gp->introk;
}

static int usend_slow(struct weft_chan *c, const void *elem, bool block)
{
	chanlock(c);
	int r = usend_locked(c, elem);
	if (r != -EAGAIN)
		return r;
	if (!block) {
		chanunlock(c);
		return r;
	}
	struct waiter w;
	waiter_init(&w);
	w.excl = true; /* no deadline, not a select: only a lock holder claims it */
	w.elem = (void *)elem;
	wq_push(c, &c->sendq, &w);
	waiter_block(&w, unlockchan, c, W_CHAN_SEND, -1);
	return w.result == RES_VALUE ? 0 : -EPIPE; /* a receiver took it, or close */
}

static int urecv_slow(struct weft_chan *c, void *elem, bool block)
{
	chanlock(c);
	int r = urecv_locked(c, elem);
	if (r != -EAGAIN)
		return r;
	if (!block) {
		chanunlock(c);
		return r;
	}
	struct waiter w;
	waiter_init(&w);
	w.excl = true; /* no deadline, not a select: only a lock holder claims it */
	w.elem = elem;
	wq_push(c, &c->recvq, &w);
	waiter_block(&w, unlockchan, c, W_CHAN_RECV, -1);
	if (w.result == RES_CLOSED)
		elemzero(elem, c->elemsize);
	return w.result;
}

/* *mp: getm() of the caller, inside the runtime bracket (chansend), and
 * the M we run on at the return; gp: its running G (NULL: a plain
 * thread, or the scheduler context) */
static inline __attribute__((always_inline)) int usend(struct weft_chan *c, struct m **mp,
						    struct g *gp, const void *elem, bool block)
{
	uintptr_t x = atomic_load_explicit(&c->rdv, memory_order_relaxed);
	for (;;) {
		if ((x & RDV_DIR) == RDV_RECV) {
			/* a receiver waits alone: take it (acquire: its fields) */
			if (!atomic_compare_exchange_weak_explicit(&c->rdv, &x, 0,
								   memory_order_acquire,
								   memory_order_relaxed))
				continue;
			struct waiter *r = rdv_waiter(x);
			if (r->elem)
				elemcopy(r->elem, elem, c->elemsize);
			rdv_done(r, *mp);
			return 0;
		}
		if (x == RDV_SEALED)
			break;
		/* open, and no receiver waits */
		if (!block)
			return -EAGAIN;
		if (x != 0 || !rdv_parker(gp))
			break; /* a sender waits already */
		struct waiter w;
		/* excl: nothing but whoever takes it from the word (or the
		 * queue a seal moved it to) ends this wait */
		waiter_init_word(&w, gp);
		w.elem = (void *)elem;
		if (rdv_park(c, mp, &w, RDV_SEND, W_CHAN_SEND))
			return w.result == RES_VALUE ? 0 : -EPIPE; /* taken, or close */
		/* readied to look again (on *mp, rdv_park) */
		x = atomic_load_explicit(&c->rdv, memory_order_relaxed);
	}
	/* the locked path: sealed, a party of our side waits already, or
	 * we cannot park through the word */
	int r = usend_slow(c, elem, block);
	*mp = getm(); /* it may have parked: perhaps another M now */
	return r;
}

/* *mp: getm() of the caller, inside the runtime bracket (chanrecv), and
 * the M we run on at the return; gp: its running G (NULL: a plain
 * thread, or the scheduler context) */
static inline __attribute__((always_inline)) int urecv(struct weft_chan *c, struct m **mp,
						    struct g *gp, void *elem, bool block)
{
	uintptr_t x = atomic_load_explicit(&c->rdv, memory_order_relaxed);
	for (;;) {
		if ((x & RDV_DIR) == RDV_SEND) {
			/* a sender waits alone: take it (acquire: its fields) */
			if (!atomic_compare_exchange_weak_explicit(&c->rdv, &x, 0,
								   memory_order_acquire,
								   memory_order_relaxed))
				continue;
			struct waiter *s = rdv_waiter(x);
			if (elem)
				elemcopy(elem, s->elem, c->elemsize);
			rdv_done(s, *mp);
			return 1;
		}
		if (x == RDV_SEALED)
			break;
		if (!block)
			return -EAGAIN;
		if (x != 0 || !rdv_parker(gp))
			break; /* a receiver waits already */
		struct waiter w;
		/* excl: nothing but whoever takes it from the word (or the
		 * queue a seal moved it to) ends this wait */
		waiter_init_word(&w, gp);
		w.elem = elem;
		if (rdv_park(c, mp, &w, RDV_RECV, W_CHAN_RECV)) {
			if (w.result == RES_CLOSED)
				elemzero(elem, c->elemsize);
			return w.result;
		}
		/* readied to look again (on *mp, rdv_park) */
		x = atomic_load_explicit(&c->rdv, memory_order_relaxed);
	}
	/* the locked path: sealed, a party of our side waits already, or
	 * we cannot park through the word */
	int r = urecv_slow(c, elem, block);
	*mp = getm(); /* it may have parked: perhaps another M now */
	return r;
}

/* ---- public: make, send, receive, close --------------------------------------- */

weft_chan_t *weft_chan_make(size_t elem_size, size_t cap)
{
	size_t slotsize = 8 + ((elem_size + 7) & ~(size_t)7);
	if (elem_size > SIZE_MAX / 2 || cap > (SIZE_MAX / 4 - sizeof(struct weft_chan)) / slotsize) {
		errno = EINVAL;
		return NULL;
	}
	rt_enter(); /* the P's allocation cache, on a G */
	struct weft_chan *c = rtalloc_aligned(sizeof *c + (cap ? cap * slotsize : 0), 64);
	rt_leave();
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->magic = CHAN_LIVE;
	c->elemsize = elem_size;
	c->cap = cap;
	c->rdvsize = !cap && elemfast(elem_size) ? elem_size : RDV_NOFAST;
	if (cap) {
		c->slotsize = slotsize;
		uint64_t p = 1;
		while (p < (uint64_t)cap + 1)
			p <<= 1;
		c->markbit = p;
		c->onelap = p << 1;
		for (size_t i = 0; i < cap; i++)
			atomic_init(&slotat(c, i)->stamp, i); /* lap 0: writable at i */
	}
	return c;
}

void weft_chan_free(weft_chan_t *c)
{
	if (!c)
		return;
	if (!chan_ok(c)) { /* freed twice, or never made */
		errno = EINVAL;
		return;
	}
	chanlock(c);
	bool busy = c->recvq.q.head || c->sendq.q.head;
	chanunlock(c);
	if (busy)
		fatal("weft_chan_free: a green thread or thread is blocked on the channel");
	c->magic = CHAN_FREED;
	rt_enter();
	rtfree(c);
	rt_leave();
}

static inline int fail(int r)
{
	if (r < 0) {
		errno = -r;
		return -1;
	}
	return r;
}

/* Off a G (a plain thread; the scheduler context): no bracket, and
 * the word is not parked through (rdv_parker). */
static __attribute__((noinline)) int chansend_nog(struct weft_chan *c, struct m *m,
						  const void *elem, bool block)
{
	return c->cap ? bsend(c, elem, block) : usend(c, &m, NULL, elem, block);
}

static __attribute__((noinline)) int chanrecv_nog(struct weft_chan *c, struct m *m, void *elem,
						  bool block)
{
	return c->cap ? brecv(c, elem, block) : urecv(c, &m, NULL, elem, block);
}

/* The runtime bracket first: a G holds its P across the whole
 * operation, so the nested park/ready calls stay cheap.  Inlined into
 * the public calls, with the M and G looked up once: a park hands back
 * the M the G resumes on (gopark_g), and the G is the same one after.
 * Off a G, out of line: the inlined path knows it has an M and a G. */
static inline __attribute__((always_inline)) int chansend(weft_chan_t *c, const void *elem,
							  bool block)
{
	if (!chan_ok(c) || unlikely(!elem && c->elemsize))
		return -EINVAL;
	struct m *m = getm();
	struct g *gp;
	if (unlikely(!m) || unlikely(!(gp = atomic_load_explicit(&m->curg, memory_order_relaxed))))
		return chansend_nog(c, m, elem, block);
	rt_enter_g(m, gp);
	int r;
	if (c->cap) {
		r = bsend(c, elem, block);
		m = getm(); /* it may have parked: perhaps another M now */
	} else {
		r = usend(c, &m, gp, elem, block);
	}
	rt_leave_g(m, gp);
	return r;
}

static inline __attribute__((always_inline)) int chanrecv(weft_chan_t *c, void *elem, bool block)
{
	if (!chan_ok(c))
		return -EINVAL;
	struct m *m = getm();
	struct g *gp;
	if (unlikely(!m) || unlikely(!(gp = atomic_load_explicit(&m->curg, memory_order_relaxed))))
		return chanrecv_nog(c, m, elem, block);
	rt_enter_g(m, gp);
	int r;
	if (c->cap) {
		r = brecv(c, elem, block);
		m = getm(); /* it may have parked: perhaps another M now */
	} else {
		r = urecv(c, &m, gp, elem, block);
	}
	rt_leave_g(m, gp);
	return r;
}

/* ---- the taking half of a hand-off, without a stack frame ----
 *
 * A blocking send or receive that finds its counterpart alone in the
 * word (the common case of a hand-off; the other party parks) does all
 * its work inline: no call, so the compiler saves no callee-saved
 * register and keeps no frame (about a quarter of such an operation's
 * instructions were its prologue and epilogue).  Anything else - not an
 * unbuffered channel, an element size the copy does not inline, off a
 * G, a nested runtime call, sysmon's flags on our P - calls the
 * general path (weft_chan_send_slow, before anything changed); no
 * counterpart and a G that may park through the word, the park itself
 * (gopark_rdv, proc.c: the waiter, its publication and the switch in
 * one frame, the only one that saves registers on that path), and
 * anything but a value back from it, the rest (chansend_parked, which
 * gopark_rdv calls: the public call keeps nothing across the park, so
 * the compiler gives it no callee-saved register to save on any path -
 * it saved three at every call, taking or parking, while it had c and
 * elem to keep for this); the
 * word sealed, a party of our side in it, or a lost race for the
 * counterpart, the rest of the general path inside the runtime bracket
 * (chansend_in); a full runnext or more than one P,
 * the rest of the ready.  Not as tail calls (NOTAIL): the frame is made
 * on those paths only.
 * The same steps as usend/urecv's taking branch and rdv_done, in the
 * same order. */

static __attribute__((noinline)) int weft_chan_send_slow(weft_chan_t *c, const void *elem)
{
	return fail(chansend(c, elem, true));
}

static __attribute__((noinline)) int weft_chan_recv_slow(weft_chan_t *c, void *elem)
{
	return fail(chanrecv(c, elem, true));
}

/* Inside the bracket, having taken nothing: the general path's rest. */
static __attribute__((noinline)) int chansend_in(struct weft_chan *c, struct m *m, struct g *gp,
						 const void *elem)
{
	int r = usend(c, &m, gp, elem, true);
	rt_leave_g(m, gp);
	return fail(r);
}

static __attribute__((noinline)) int chanrecv_in(struct weft_chan *c, struct m *m, struct g *gp,
						 void *elem)
{
	int r = urecv(c, &m, gp, elem, true);
	rt_leave_g(m, gp);
	return fail(r);
}

/* Parked through the word (gopark_rdv, which calls these) and back with
 * anything but a value: closed meanwhile, or nothing was published (look
 * again: the general path).  The public call's result. */
_Static_assert(RES_VALUE == RDVPARK_TAKEN, "gopark_rdv: a taken waiter's result");

static inline struct weft_chan *rdv_chan(_Atomic uintptr_t *word)
{
	return (struct weft_chan *)((char *)word - offsetof(struct weft_chan, rdv));
}

static __attribute__((noinline)) int chansend_parked(_Atomic uintptr_t *word, struct m *m,
						     void *elem, int32_t res)
{
	struct weft_chan *c = rdv_chan(word);
	struct g *gp = atomic_load_explicit(&m->curg, memory_order_relaxed);
	if (res == RDVPARK_AGAIN)
		return chansend_in(c, m, gp, elem);
	rt_leave_g(m, gp);
	return fail(-EPIPE); /* close */
}

static __attribute__((noinline)) int chanrecv_parked(_Atomic uintptr_t *word, struct m *m,
						     void *elem, int32_t res)
{
	struct weft_chan *c = rdv_chan(word);
	struct g *gp = atomic_load_explicit(&m->curg, memory_order_relaxed);
	if (res == RDVPARK_AGAIN)
		return chanrecv_in(c, m, gp, elem);
	if (res == RES_CLOSED)
		elemzero(elem, c->elemsize);
	rt_leave_g(m, gp);
	return fail(res);
}

/* Taken, w's element copied and its outcome set: the rest of the ready
 * (runnext was full, or more than one P), and the bracket's end. */
static __attribute__((noinline)) int rdv_done_slow(struct m *m, struct g *gp, struct g *wg, int r)
{
	goready_m_slow(m, wg);
	mtally(&m->p->nchanfast);
	rt_leave_g(m, gp);
	return r;
}

/* The bracket's end when sysmon asks the G to yield. */
static __attribute__((noinline)) int rt_leave_slow(struct m *m, int r)
{
	leaveruntime(m);
	return r;
}

/* call, not as a tail call: the public call's frame stays on the stack
 * under what it calls, so that a parked G's traceback (weft_dump) names
 * the API call it is parked in (traceback.c keeps the outermost runtime
 * frame).  Only the paths that call pay for a frame. */
#define NOTAIL(call)                                                                            \
	({                                                                                      \
		int r__ = (call);                                                               \
		__asm__ volatile("" : "+a"(r__)); /* the call is then not the last thing done */ \
		r__;                                                                            \
	})

static inline __attribute__((always_inline)) void elemcopy_fast(void *dst, const void *src,
								 size_t n)
{
	switch (n) {
	case 8: memcpy(dst, src, 8); break;
	case 4: memcpy(dst, src, 4); break;
	case 16: memcpy(dst, src, 16); break;
	case 0: break;
	default: __builtin_unreachable(); /* elemfast(n) */
	}
}

/* c's word holds a counterpart of ours (want: RDV_RECV for a sender),
 * and the rest of the fast case holds: take it and complete it, moving
 * the element from SRC to DST (one of them the taken waiter's w_->elem;
 * no copy if DST is NULL).  Returns the call's result, ok for a hand-off.  The
 * conditions as in chansend/chanrecv, usend/urecv and goready_m.
 * The word empty and the G one that parks through it (rdv_parker): park
 * through it at once (gopark_rdv, the waiter in its frame; REASON), and
 * back with a value, return ok; anything else, PARKED. */
#define RDV_TAKEFAST(c, want, ok, mine, SLOW, IN, PARKED, REASON, DST, SRC)                      \
	do {                                                                                    \
		struct m *m_;                                                                   \
		struct g *gp_;                                                                  \
		if (unlikely(!chan_ok(c)) || (c)->rdvsize > 16 /* RDV_NOFAST */ ||              \
		    unlikely(!(m_ = getm())) ||                                                 \
		    unlikely(!(gp_ = atomic_load_explicit(&m_->curg, memory_order_relaxed))) || \
		    gp_->rtdepth || atomic_load_explicit(&m_->p->flags, memory_order_relaxed))    \
			return NOTAIL(SLOW);                                                    \
		rtdepth_set(gp_, 1); /* rt_enter_g, its flags seen clear */                    \
		uintptr_t x_ = atomic_load_explicit(&(c)->rdv, memory_order_relaxed);           \
		/* acquire: the waiter's fields (usend) */                                      \
		if (unlikely((x_ & RDV_DIR) != (want)) ||                                       \
		    !atomic_compare_exchange_strong_explicit(&(c)->rdv, &x_, 0,                 \
							     memory_order_acquire,              \
							     memory_order_relaxed)) {           \
			if (x_ != 0 || !rdv_parker(gp_))                                        \
				return NOTAIL(IN(c, m_, gp_, mine));                            \
			/* nobody waits: park as the word's waiter (usend's park); */          \
			/* anything but a value back, PARKED ran in it */                      \
			struct rdvpark pr_ =                                                    \
				gopark_rdv(m_, gp_, &(c)->rdv,                                  \
					   RDVPARK_HOW((want) ^ RDV_DIR, (REASON)),             \
					   (void *)(mine), PARKED);                             \
			if (unlikely(!pr_.m))                                                   \
				return pr_.r;                                                   \
			/* rt_leave_g, on the M we resumed on; the G is ours */                \
			rtdepth_set(atomic_load_explicit(&pr_.m->curg, memory_order_relaxed), 0); \
			if (unlikely(atomic_load_explicit(&pr_.m->p->flags, memory_order_relaxed) & \
				     PF_PREEMPT))                                               \
				return NOTAIL(rt_leave_slow(pr_.m, ok));                        \
			return ok;                                                              \
		}                                                                               \
		struct waiter *w_ = rdv_waiter(x_);                                             \
		if (DST)                                                                        \
			elemcopy_fast(DST, SRC, (c)->rdvsize);                                  \
		w_->result = RES_VALUE;                                                         \
		struct g *wg_ = w_->g;                                                          \
		/* release: what we wrote for it before it reads (waiter_claim_wake_gm) */     \
		atomic_store_explicit(&wg_->waitstate, w_->seq << 2 | WS_WOKEN,                 \
				      memory_order_release);                                    \
		struct p *pp_ = m_->p;                                                          \
		if (unlikely(atomic_load_explicit(&sched.gomaxprocs, memory_order_relaxed) !=   \
			     1) ||                                                              \
		    atomic_load_explicit(&pp_->runnext, memory_order_relaxed))                  \
			return NOTAIL(rdv_done_slow(m_, gp_, wg_, ok));                         \
		atomic_store_explicit(&wg_->status, G_RUNNABLE, memory_order_relaxed);          \
		atomic_store_explicit(&wg_->waitreason, W_NONE, memory_order_relaxed);          \
		/* seen empty, stays empty until our store (goready_m) */                      \
		atomic_store_explicit(&pp_->runnext, wg_, memory_order_release);                \
		mtally(&pp_->nchanfast);                                                        \
		rtdepth_set(gp_, 0); /* rt_leave_g */                                           \
		if (unlikely(atomic_load_explicit(&pp_->flags, memory_order_relaxed) & PF_PREEMPT)) \
			return NOTAIL(rt_leave_slow(m_, ok));                                   \
		return ok;                                                                      \
	} while (0)

int weft_chan_send(weft_chan_t *c, const void *elem)
{
	/* a send with a NULL element of a non-empty type: the slow path's EINVAL */
	if (unlikely(!elem))
		return NOTAIL(weft_chan_send_slow(c, elem));
	RDV_TAKEFAST(c, RDV_RECV, 0, elem, weft_chan_send_slow(c, elem), chansend_in, chansend_parked,
		     W_CHAN_SEND, w_->elem, elem);
}

int weft_chan_recv(weft_chan_t *c, void *elem)
{
	RDV_TAKEFAST(c, RDV_SEND, 1, elem, weft_chan_recv_slow(c, elem), chanrecv_in, chanrecv_parked,
		     W_CHAN_RECV, elem, w_->elem);
}

int weft_chan_trysend(weft_chan_t *c, const void *elem)
{
	return fail(chansend(c, elem, false));
}

int weft_chan_tryrecv(weft_chan_t *c, void *elem)
{
	return fail(chanrecv(c, elem, false));
}

/* Claim everyone queued on q onto the wake list: unbuffered parties get
 * their outcome (ok), buffered ones look again and find the close. */
static struct waiter *claimall(struct weft_chan *c, struct wq *q, int ok, struct waiter *list)
{
	struct waiter *w;
	while ((w = wq_claim(c, q))) {
		finish(w, ok, c->cap > 0);
		w->next = list; /* ours now: it sleeps until we wake it */
		list = w;
	}
	return list;
}

int weft_chan_close(weft_chan_t *c)
{
	if (!chan_ok(c)) {
		errno = EINVAL;
		return -1;
	}
	rt_enter();
	chanlock(c);
	if (c->closed) {
		chanunlock(c);
		rt_leave();
		errno = EPIPE;
		return -1;
	}
	c->closed = 1;
	if (c->cap)
		atomic_fetch_or(&c->tail, c->markbit); /* no send succeeds after this */
	/* receivers get 0 (an unbuffered one only waits with nothing
	 * offered), senders EPIPE */
	struct waiter *list = claimall(c, &c->recvq, RES_CLOSED, NULL);
	list = claimall(c, &c->sendq, RES_EPIPE, list);
	chanunlock(c);
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
	return chan_ok(c) && c->cap ? ring_len(c) : 0;
}

size_t weft_chan_cap(weft_chan_t *c)
{
	return chan_ok(c) ? c->cap : 0;
}

/* ---- select ---------------------------------------------------------------------- */

struct selstate {
	weft_case_t *cases;
	size_t n;
	struct weft_chan **locks; /* distinct channels in address order */
	size_t nlocks;
	uint32_t *order;          /* poll order: a random permutation of live cases */
	size_t norder;
	struct waiter *nodes;     /* one queue node per case */
	struct weft_chan *notify; /* after unlocking: wake a counterpart here */
	int notifyop;             /* ... on its queue for this op */
};

static void lockall(struct selstate *st)
{
	for (size_t i = 0; i < st->nlocks; i++)
		chanlock(st->locks[i]);
}

/* In reverse, skipping one channel already unlocked (or NULL). */
static void unlockall_but(struct selstate *st, struct weft_chan *skip)
{
	for (size_t i = st->nlocks; i-- > 0;)
		if (st->locks[i] != skip)
			chanunlock(st->locks[i]);
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

/* A buffered case, lock-free: true if it completed (ok stored). */
static bool ringpoll(struct selstate *st, weft_case_t *cs)
{
	struct weft_chan *c = cs->chan;
	int r;
	if (cs->op == WEFT_RECV) {
		r = ring_recv(c, cs->elem);
		if (r == R_CLOSED)
			elemzero(cs->elem, c->elemsize);
		cs->ok = r == R_OK ? 1 : 0;
	} else {
		r = ring_send(c, cs->elem);
		cs->ok = r == R_OK ? 1 : -1;
	}
	if (r == R_BLOCK)
		return false;
	if (r == R_OK) {
		st->notify = c;
		st->notifyop = cs->op;
	}
	return true;
}

/* An unbuffered case with every channel locked.  On success all locks
 * are released and ok is stored; false (locks kept) if not ready. */
static bool syncpoll(struct selstate *st, weft_case_t *cs)
{
	struct weft_chan *c = cs->chan;
	if (cs->op == WEFT_RECV) {
		struct waiter *s = wq_claim(c, &c->sendq);
		if (s) {
			unlockall_but(st, c);
			recv_direct(c, s, cs->elem);
			cs->ok = 1;
			return true;
		}
		if (!c->closed)
			return false;
		unlockall(st);
		elemzero(cs->elem, c->elemsize);
		cs->ok = 0;
		return true;
	}
	if (!c->closed) {
		struct waiter *r = wq_claim(c, &c->recvq);
		if (!r)
			return false;
		unlockall_but(st, c);
		send_direct(c, r, cs->elem);
		cs->ok = 1;
		return true;
	}
	unlockall(st);
	cs->ok = -1;
	return true;
}

/* One pass over the cases in poll order, every channel locked.  Returns
 * the case that completed (all unlocked) or -1 (still locked).
 * ringonly: the second look after queueing, at buffered cases only. */
static int pollpass(struct selstate *st, bool ringonly)
{
	for (size_t k = 0; k < st->norder; k++) {
		uint32_t i = st->order[k];
		weft_case_t *cs = &st->cases[i];
		if (cs->chan->cap) {
			if (ringpoll(st, cs)) {
				if (ringonly)
					return (int)i; /* the caller dequeues and unlocks */
				unlockall(st);
				return (int)i;
			}
		} else if (!ringonly && syncpoll(st, cs)) {
			return (int)i;
		}
	}
	return -1;
}

static struct wq *caseq(weft_case_t *cs)
{
	return cs->op == WEFT_RECV ? &cs->chan->recvq : &cs->chan->sendq;
}

/* With every channel locked: take back the nodes no waker took. */
static void dequeueall(struct selstate *st)
{
	for (size_t k = 0; k < st->norder; k++) {
		uint32_t i = st->order[k];
		if (st->nodes[i].queued)
			wq_remove(st->cases[i].chan, caseq(&st->cases[i]), &st->nodes[i]);
	}
}

/* Nothing was ready (every channel locked): queue a node on every
 * case's channel and sleep until one fires, the deadline passes, or a
 * buffered channel asks us to look again.  Returns the case index, -1
 * on timeout, -2 to poll again. */
static int selwait(struct selstate *st, int64_t deadline)
{
	struct selrec rec;
	waiter_init(&rec.w);
	rec.fired = -1;
	rec.ok = 0;
	rec.done = false;
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
		wq_push(cs->chan, caseq(cs), w);
	}
	/* buffered channels: look again now that wakers can see us */
	int fired = pollpass(st, true);
	if (fired >= 0) {
		dequeueall(st);
		unlockall(st);
		return fired;
	}
	bool woken = waiter_block(&rec.w, unlockall, st, W_SELECT, deadline);
	lockall(st);
	dequeueall(st); /* the winner's was dequeued by its waker */
	unlockall(st);
	if (!woken)
		return -1;
	if (!rec.done)
		return -2;
	weft_case_t *cs = &st->cases[rec.fired];
	cs->ok = rec.ok;
	if (cs->op == WEFT_RECV && rec.ok == 0)
		elemzero(cs->elem, cs->chan->elemsize);
	return rec.fired;
}

/* Park for good, or until the deadline: select with no live case. */
static void selblock(int64_t deadline)
{
	struct waiter w;
	waiter_init(&w);
	while (waiter_block(&w, NULL, NULL, W_SELECT_NOCASES, deadline))
		waiter_init(&w); /* nobody wakes it; be safe anyway */
}

static int selectloop(struct selstate *st, int64_t timeout_ns, int64_t deadline)
{
	sortlocks(st);
	shuffle(st);
	if (st->nlocks == 0) {
		if (timeout_ns != 0)
			selblock(deadline);
		return -1;
	}
	for (;;) {
		lockall(st);
		int fired = pollpass(st, false);
		if (fired >= 0)
			return fired;
		if (timeout_ns == 0) {
			unlockall(st);
			return -1;
		}
		fired = selwait(st, deadline);
		if (fired != -2)
			return fired;
	}
}

#define SMALLSEL 8

int weft_select(weft_case_t *cases, size_t n, int64_t timeout_ns)
{
	if ((n && !cases) || n > MAXCASES || timeout_ns < -1) {
		errno = EINVAL;
		return -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct weft_chan *c = cases[i].chan;
		if ((cases[i].op != WEFT_SEND && cases[i].op != WEFT_RECV) ||
		    (c && (!chan_ok(c) ||
			   (cases[i].op == WEFT_SEND && !cases[i].elem && c->elemsize)))) {
			errno = EINVAL;
			return -1;
		}
	}
	int64_t deadline = timeout_ns > 0 ? nanotime() + timeout_ns : -1;

	struct weft_chan *locks_s[SMALLSEL];
	uint32_t order_s[SMALLSEL];
	struct waiter nodes_s[SMALLSEL];
	struct selstate st = { cases, n, locks_s, 0, order_s, 0, nodes_s, NULL, 0 };
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
	int fired = selectloop(&st, timeout_ns, deadline);
	if (st.notify) /* a buffered case completed: its counterpart may wait */
		notify(st.notify, st.notifyop == WEFT_RECV ? &st.notify->sendq : &st.notify->recvq);
	rt_leave();
	rtfree(heap);
	if (fired < 0)
		errno = ETIMEDOUT;
	return fired;
}
