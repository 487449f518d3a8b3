// stdio_cxx.cc - C++ iostreams and C stdio on one stdout (a pipe under
// the test), from threads: cout, printf, puts, cerr and write(1, ...)
// interleaved, in the order and with the flush points natively
// (sync_with_stdio, the default, makes cout write through stdout's
// FILE).  Under the shim stdout is a FILE whose writes park the G; cout
// must be bound to that same FILE, so the test compares every byte with
// a native run.  Built without weft.
#include <cstdio>
#include <iostream>
#include <pthread.h>
#include <unistd.h>

static void *run(void *)
{
	for (int i = 0; i < 2000; i++) {
		std::cout << "cout " << i << '\n';
		std::printf("printf %d\n", i);
		if (i % 3 == 0)
			std::puts("puts");
		if (i % 101 == 0) {
			if (write(1, "W\n", 2) != 2)
				return nullptr;
			std::cerr << "cerr " << i << std::endl;
		}
		if (i % 500 == 0)
			std::cout << std::flush;
	}
	std::cout << "endl" << std::endl;
	if (write(1, "W end\n", 6) != 6)
		return nullptr;
	std::printf("last, flushed by exit\n");
	return nullptr;
}

int main()
{
	pthread_t t;
	if (pthread_create(&t, nullptr, run, nullptr) != 0 || pthread_join(t, nullptr) != 0)
		return 1;
	return 0;
}
