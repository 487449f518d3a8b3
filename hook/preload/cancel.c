/*
 * cancel.c - pthread_cancel of a G: deferred cancellation, acted on at
 * the cancellation points where a G parks.
 *
 * glibc keeps a thread's cancellation state in its descriptor and acts
 * on it inside its own cancellation points by unwinding the stack; a G
 * has no descriptor of its own (it runs on an OS thread's), so under
 * the shim the state is the G's (g->cancel) and the points are weft's:
 *
 *   - pthread_cancel sets the request and, if the G has cancellation
 *     enabled, interrupts its park (g_interrupt, as a signal does);
 *   - every interruptible park (read, write, accept, connect, poll,
 *     select, epoll_wait, the sleeps, sem_wait, the cond waits, sigwait
 *     ...) that ends interrupted asks cancel_point first, as does
 *     pthread_testcancel: with a request pending and cancellation
 *     enabled the G exits with PTHREAD_CANCELED through pthread_exit's
 *     path (thread.c), so pthread_cleanup_push handlers run innermost
 *     first and pthread_join returns PTHREAD_CANCELED;
 *   - a condition wait takes its mutex back first, as glibc's does, so
 *     the usual cleanup handler (unlock) is right.
 *
 * A call that does not park (a read with data waiting) is not a
 * cancellation point here, and PTHREAD_CANCEL_ASYNCHRONOUS is taken
 * for deferred: weft never stops a G between two instructions.
 */
#include "shim.h"

enum {
	C_REQ = 1,      /* pthread_cancel asked for it */
	C_DISABLED = 2, /* PTHREAD_CANCEL_DISABLE */
	C_ASYNC = 4,    /* PTHREAD_CANCEL_ASYNCHRONOUS (acted on as deferred) */
};

DEFREAL(pthread_setcancelstate);
DEFREAL(pthread_setcanceltype);
DEFREAL(pthread_testcancel);

int cancel_g(struct g *gp)
{
	uint32_t was = atomic_fetch_or(&gp->cancel, C_REQ);
	if (!(was & (C_REQ | C_DISABLED)))
		g_interrupt(gp); /* out of its park, to its cancellation point */
	return 0;
}

/* A cancellation point on the running G: exits if cancelled. */
static void cancel_point(void)
{
	struct g *gp = hook_g();
	if (!gp || !gp->sigon ||
	    (atomic_load(&gp->cancel) & (C_REQ | C_DISABLED)) != C_REQ)
		return;
	atomic_store(&gp->cancel, C_DISABLED); /* as glibc: no second one */
	shim_exit(PTHREAD_CANCELED);
}

HOOK int pthread_setcancelstate(int state, int *old)
{
	struct g *gp = hook_g();
	if (!gp || !gp->sigon)
		return REAL(pthread_setcancelstate)(state, old);
	if (state != PTHREAD_CANCEL_ENABLE && state != PTHREAD_CANCEL_DISABLE)
		return EINVAL;
	uint32_t was = state == PTHREAD_CANCEL_DISABLE ? atomic_fetch_or(&gp->cancel, C_DISABLED)
						       : atomic_fetch_and(&gp->cancel, ~C_DISABLED);
	if (old)
		*old = (was & C_DISABLED) ? PTHREAD_CANCEL_DISABLE : PTHREAD_CANCEL_ENABLE;
	if (state == PTHREAD_CANCEL_ENABLE && (was & C_REQ))
		g_interrupt(gp); /* its next park is where it acts */
	return 0;
}

HOOK int pthread_setcanceltype(int type, int *old)
{
	struct g *gp = hook_g();
	if (!gp || !gp->sigon)
		return REAL(pthread_setcanceltype)(type, old);
	if (type != PTHREAD_CANCEL_DEFERRED && type != PTHREAD_CANCEL_ASYNCHRONOUS)
		return EINVAL;
	uint32_t was = type == PTHREAD_CANCEL_ASYNCHRONOUS ? atomic_fetch_or(&gp->cancel, C_ASYNC)
							   : atomic_fetch_and(&gp->cancel, ~C_ASYNC);
	if (old)
		*old = (was & C_ASYNC) ? PTHREAD_CANCEL_ASYNCHRONOUS : PTHREAD_CANCEL_DEFERRED;
	return 0;
}

HOOK void pthread_testcancel(void)
{
	struct g *gp = hook_g();
	if (!gp || !gp->sigon) {
		REAL(pthread_testcancel)();
		return;
	}
	cancel_point();
}

void cancel_start(void)
{
	hook_cancel = cancel_point;
}
