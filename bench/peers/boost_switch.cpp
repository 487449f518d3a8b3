/*
 * boost_switch -- Boost peers for context-switch and spawn cost.
 *
 *   boost_switch [N]       default 5000000 switches / 200000 spawns;
 *                          QUICK=1 in the env divides both by 50.
 *
 * Measures
 *   - a raw Boost.Context switch (detail::jump_fcontext between main and
 *     one make_fcontext context), ns per one-way switch;
 *   - Boost.Fiber this_fiber::yield() ping-pong between two fibers, ns per
 *     switch;
 *   - Boost.Fiber spawn + join of an empty fiber, ns per fiber.
 *
 * Prints: boost_context_switch_ns=<ns> boost_fiber_yield_ns=<ns>
 *         boost_fiber_spawn_ns=<ns> n=<N>           (one line)
 */
#include <boost/context/detail/fcontext.hpp>
#include <boost/fiber/all.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace ctx = boost::context::detail;

static double now_ns()
{
	using namespace std::chrono;
	return (double)duration_cast<nanoseconds>(
		steady_clock::now().time_since_epoch()).count();
}

/* Context body: bounce straight back to whoever jumped here, forever. */
static void bounce(ctx::transfer_t t)
{
	for (;;)
		t = ctx::jump_fcontext(t.fctx, nullptr);
}

static double context_switch(long n)
{
	const std::size_t size = 64 * 1024;
	std::vector<char> stack(size);
	/* The stack grows down: make_fcontext wants its top. */
	ctx::fcontext_t c = ctx::make_fcontext(stack.data() + size, size, bounce);
	double t0 = now_ns();

	for (long i = 0; i < n; i++)
		c = ctx::jump_fcontext(c, nullptr).fctx;
	/* Each iteration is two switches: there and back. */
	return (now_ns() - t0) / (2.0 * (double)n);
	/* The context is simply abandoned with its stack; nothing to unwind. */
}

static double fiber_yield(long n)
{
	auto body = [n] {
		for (long i = 0; i < n; i++)
			boost::this_fiber::yield();
	};
	double t0 = now_ns();
	boost::fibers::fiber a(body), b(body);

	a.join();
	b.join();
	return (now_ns() - t0) / (2.0 * (double)n);
}

static double fiber_spawn(long n)
{
	double t0 = now_ns();

	for (long i = 0; i < n; i++) {
		boost::fibers::fiber f([] {});
		f.join();
	}
	return (now_ns() - t0) / (double)n;
}

int main(int argc, char **argv)
{
	const char *quick = std::getenv("QUICK");
	long n = argc > 1 ? std::atol(argv[1]) : 5000000;
	long spawns = n / 25;

	if (quick != nullptr && std::strcmp(quick, "1") == 0) {
		n /= 50;
		spawns /= 50;
	}
	if (n < 1)
		n = 1;
	if (spawns < 1)
		spawns = 1;
	double cs = context_switch(n);
	double fy = fiber_yield(n);
	double fs = fiber_spawn(spawns);
	std::printf("boost_context_switch_ns=%.1f boost_fiber_yield_ns=%.1f "
		    "boost_fiber_spawn_ns=%.1f n=%ld\n", cs, fy, fs, n);
	return 0;
}
