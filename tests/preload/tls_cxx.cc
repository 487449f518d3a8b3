/*
 * tls_cxx.cc - a C++ thread_local object with a constructor and a
 * destructor in 1,000 threads that block while they use it: a plain
 * program (g++ -O2) that knows nothing of weft.  Each thread's object
 * must be constructed once and destroyed once, on that thread.
 *
 * Prints "cxx ctors=N dtors=N wrong=N"; exit 0 if all is well.
 */
#include <atomic>
#include <cstdio>
#include <pthread.h>
#include <unistd.h>

enum { N = 1000 };

static std::atomic<long> ctors, dtors, wrong;

struct Obj {
	pthread_t owner;
	long id = 0;
	Obj() : owner(pthread_self()) { ctors++; }
	~Obj()
	{
		if (!pthread_equal(owner, pthread_self()))
			wrong++;
		dtors++;
	}
};

static thread_local Obj obj;

static void *body(void *arg)
{
	long id = (long)arg;
	obj.id = id;
	for (int i = 0; i < 20; i++) {
		usleep(1); /* parks; may come back on another OS thread */
		if (obj.id != id || !pthread_equal(obj.owner, pthread_self()))
			wrong++;
	}
	return nullptr;
}

int main()
{
	static pthread_t t[N];
	for (long i = 0; i < N; i++)
		if (pthread_create(&t[i], nullptr, body, (void *)(i + 1)) != 0)
			return 2;
	for (int i = 0; i < N; i++)
		pthread_join(t[i], nullptr);
	std::printf("cxx ctors=%ld dtors=%ld wrong=%ld\n", ctors.load(), dtors.load(), wrong.load());
	return ctors == N && dtors == N && wrong == 0 ? 0 : 1;
}
