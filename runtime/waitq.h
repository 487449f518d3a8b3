/*
 * waitq.h - FIFO queues of struct waiter for channels and the sync
 * types (chan.c, sync.c).  Every function runs under the owning
 * primitive's lock.
 *
 * A queued node either sleeps itself or, for select, stands for a
 * shared record whose first member is the waiter that sleeps (w->sel).
 * Public types keep a queue as two void pointers (_head, _tail); the
 * fields here are void * too so that both are the same type.
 */
#ifndef WEFT_WAITQ_H
#define WEFT_WAITQ_H

#include "runtime.h"

struct waitq {
	void *head; /* struct waiter *, oldest first */
	void *tail;
};

/* The view of a public type's { void *_head, *_tail; } pair. */
#define WAITQ(obj) ((struct waitq *)(void *)&(obj)->_head)

/* The waiter that actually sleeps for node w. */
static inline struct waiter *waiter_sleeper(struct waiter *w)
{
	return w->sel ? (struct waiter *)w->sel : w;
}

static inline bool waitq_empty(const struct waitq *q)
{
	return q->head == NULL;
}

static inline void waitq_push(struct waitq *q, struct waiter *w)
{
	struct waiter *t = q->tail;
	w->next = NULL;
	w->prev = t;
	if (t)
		t->next = w;
	else
		q->head = w;
	q->tail = w;
	w->queued = true;
}

/* At the head: a waiter that was woken and lost the race goes back
 * first in line (Go's LIFO re-queue in sync.Mutex). */
static inline void waitq_push_front(struct waitq *q, struct waiter *w)
{
	struct waiter *h = q->head;
	w->prev = NULL;
	w->next = h;
	if (h)
		h->prev = w;
	else
		q->tail = w;
	q->head = w;
	w->queued = true;
}

static inline void waitq_remove(struct waitq *q, struct waiter *w)
{
	if (w->prev)
		w->prev->next = w->next;
	else
		q->head = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		q->tail = w->prev;
	w->next = w->prev = NULL;
	w->queued = false;
}

/* Dequeue the first node whose sleeper we can claim.  Nodes whose
 * sleeper is gone (timed out, or a select another channel already won)
 * are dropped on the way: their owner takes the lock again before it
 * returns and finds them unqueued. */
static inline struct waiter *waitq_claim(struct waitq *q)
{
	struct waiter *w;
	while ((w = q->head)) {
		waitq_remove(q, w);
		if (waiter_claim(waiter_sleeper(w)))
			return w;
	}
	return NULL;
}

/* ---- spinning before sleeping ------------------------------------------ */


/* Is it worth spinning a little before sleeping?  Only with a second
 * CPU, and (on a G) only if another P runs something that could make
 * progress and ours has nothing else to run (Go's canSpin). */
static inline bool spin_worthwhile(void)
{
	if (ncpu() <= 1)
		return false;
	struct m *m = getm();
	if (!m || !m->curg)
		return true; /* a plain thread */
	if (atomic_load_explicit(&sched.gomaxprocs, memory_order_relaxed) <=
	    atomic_load_explicit(&sched.npidle, memory_order_relaxed) +
					 atomic_load_explicit(&sched.nmspinning, memory_order_relaxed) + 1)
		return false;
	return !m->p || runqempty(m->p);
}

static inline void spin_pause(int n)
{
	for (int i = 0; i < n; i++)
		cpu_relax();
}

#endif
