/*
 * test_tls.c - a G with thread-local storage of its own in a linked
 * program (weft_attr_t.tls = WEFT_TLS_THREAD; runtime/tls.c): errno and
 * __thread follow the G across parks and migrations, even where gcc -O2
 * keeps errno's address across weft's own blocking calls.
 */
#include <errno.h>
#include <stdatomic.h>

#include "check.h"

#if defined(__SANITIZE_ADDRESS__)
#define TEST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TEST_ASAN 1
#endif
#endif
#ifndef TEST_ASAN
#define TEST_ASAN 0
#endif

static atomic_long wrong, total;
static atomic_int stop;
static __thread int tv;

/* Keep the other P busy and the Gs moving between Ms. */
static void churner(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop))
		weft_sleep(10 * 1000);
}

/* The pattern: errno's address taken before weft_select parks. */
static void selector(void *arg)
{
	weft_wg_t *wg = arg;
	weft_chan_t *c = weft_chan_make(sizeof(int), 0);
	weft_case_t cs = { c, WEFT_RECV, NULL, 0 };
	int id = (int)weft_self();
	tv = id;
	for (int i = 0; i < 200; i++) {
		errno = 0;
		int r = weft_select(&cs, 1, 50 * 1000);
		int e = errno;
		if (r != -1 || e != ETIMEDOUT || tv != id)
			atomic_fetch_add(&wrong, 1);
		atomic_fetch_add(&total, 1);
	}
	weft_chan_free(c);
	weft_wg_done(wg);
}

static int tls_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_maxprocs(2);
	for (int i = 0; i < 8; i++)
		weft_go(churner, NULL);
	weft_wg_t wg = WEFT_WG_INIT;
	weft_attr_t a = { .tls = WEFT_TLS_THREAD };
	weft_wg_add(&wg, 16);
	for (int i = 0; i < 16; i++)
		CHECK(weft_go_attr(&a, selector, &wg) > 0);
	weft_wg_wait(&wg);
	atomic_store(&stop, 1);
	return 0;
}

Test(tls_linked, errno_after_select_with_own_tls, .timeout = 120)
{
	if (TEST_TSAN || TEST_ASAN)
		cr_skip_test("per-G TLS is off in sanitizer builds");
	run_main(tls_main);
	cr_expect_eq(atomic_load(&total), 16 * 200);
	cr_expect_eq(atomic_load(&wrong), 0, "%ld of %ld calls saw the wrong errno or __thread",
		     atomic_load(&wrong), atomic_load(&total));
}

static int bad_main(int argc, char **argv)
{
	(void)argc, (void)argv;
	weft_attr_t a = { .tls = 7 };
	errno = 0;
	CHECK(weft_go_attr(&a, churner, NULL) == -1 && errno == EINVAL);
	return 0;
}

Test(tls_linked, bad_attr_tls)
{
	run_main(bad_main);
}
