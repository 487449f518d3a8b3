/*
 * deep.c - segmented stacks: many green threads, a few of which recurse
 * very deep.
 *
 * Every G evaluates an arithmetic expression with a recursive-descent
 * parser, one call chain per level of parentheses.  Most expressions are
 * small; a few nest their parentheses a million deep, which takes over
 * 100 MB of stack frames.  With fixed-size stacks every G would need
 * room for the worst case; with segmented stacks each G starts with one
 * page and the deep ones grow by linked segments (libgcc's __morestack),
 * returned when they finish.
 *
 *   cc -fsplit-stack deep.c -fuse-ld=gold -lweft_split     (make builds it)
 *   build/examples/splitstack [shallow] [deep] [depth]
 *
 * The parser calls nothing outside itself: a function built with
 * -fsplit-stack that calls code built without it (libc) is linked by
 * gold to demand about 1 MiB of free stack on entry, which would make
 * every level of the recursion take a fresh segment.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft.h"

struct job {
	const char *text;
	long want;
};

struct parser {
	const char *p;
	int bad;
};

static long expr(struct parser *ps);

static long factor(struct parser *ps)
{
	if (*ps->p == '(') {
		ps->p++;
		long v = expr(ps);
		if (*ps->p != ')')
			ps->bad = 1;
		else
			ps->p++;
		return v;
	}
	if (*ps->p < '0' || *ps->p > '9') {
		ps->bad = 1;
		return 0;
	}
	long v = 0;
	while (*ps->p >= '0' && *ps->p <= '9')
		v = v * 10 + (*ps->p++ - '0');
	return v;
}

static long term(struct parser *ps)
{
	long v = factor(ps);
	while (*ps->p == '*') {
		ps->p++;
		v *= factor(ps);
	}
	return v;
}

static long expr(struct parser *ps)
{
	long v = term(ps);
	while (*ps->p == '+' || *ps->p == '-') {
		char op = *ps->p++;
		long w = term(ps);
		v = op == '+' ? v + w : v - w;
	}
	return v;
}

static long eval(const char *text, int *bad)
{
	struct parser ps = { text, 0 };
	long v = expr(&ps);
	*bad = ps.bad || *ps.p != 0;
	return v;
}

static weft_chan_t *results;

static void worker(void *arg)
{
	struct job *j = arg;
	int bad;
	long v = eval(j->text, &bad);
	int ok = !bad && v == j->want;
	weft_chan_send(results, &ok);
}

/* "(((...(1+2)*3...)))": depth parentheses around 1+2, times 1 inside
 * each level, plus 1 at every tenth: the value is 3 + depth / 10 */
static char *nested(long depth, long *want)
{
	char *s = malloc((size_t)depth * 5 + 8);
	if (!s)
		return NULL;
	char *p = s;
	for (long i = 0; i < depth; i++)
		*p++ = '(';
	p += sprintf(p, "1+2");
	*want = 3;
	for (long i = depth; i > 0; i--) {
		*p++ = ')';
		if (i % 10 == 0) {
			memcpy(p, "+1", 2);
			p += 2;
			++*want;
		} else {
			memcpy(p, "*1", 2);
			p += 2;
		}
	}
	*p = 0;
	return s;
}

static long status_kb(const char *key)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long kb = -1;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, key, strlen(key)))
			kb = atol(line + strlen(key));
	if (f)
		fclose(f);
	return kb;
}

static int run(int argc, char **argv)
{
	long shallow = argc > 1 ? atol(argv[1]) : 10000;
	long deep = argc > 2 ? atol(argv[2]) : 4;
	long depth = argc > 3 ? atol(argv[3]) : 1000000;
	long n = shallow + deep;
	struct job *jobs = calloc((size_t)n, sizeof *jobs);
	results = weft_chan_make(sizeof(int), 0);
	if (!jobs || !results)
		return 1;
	for (long i = 0; i < n; i++) {
		if (i < deep) {
			jobs[i].text = nested(depth, &jobs[i].want);
			if (!jobs[i].text)
				return 1;
		} else {
			char *s = malloc(64);
			snprintf(s, 64, "(%ld+1)*2-(3*(%ld))", i, i % 7);
			jobs[i].text = s;
			jobs[i].want = (i + 1) * 2 - 3 * (i % 7);
		}
	}
	long rss0 = status_kb("VmRSS:");
	weft_attr_t attr = { .stack_kind = WEFT_STACK_SEGMENTED };
	for (long i = 0; i < n; i++)
		if (weft_go_attr(&attr, worker, &jobs[i]) < 0) {
			perror("weft_go_attr");
			return 1;
		}
	long good = 0;
	for (long i = 0; i < n; i++) {
		int ok;
		weft_chan_recv(results, &ok);
		good += ok;
	}
	printf("%ld expressions (%ld nested %ld deep) in segmented green threads: %ld right\n",
	       n, deep, depth, good);
	weft_sleep(50 * 1000 * 1000); /* the last Gs finish exiting */
	printf("RSS: %ld KiB before, %ld KiB at the peak, %ld KiB after (segments returned)\n",
	       rss0, status_kb("VmHWM:"), status_kb("VmRSS:"));
	return good == n ? 0 : 1;
}

int main(int argc, char **argv)
{
	return weft_main(run, argc, argv);
}
