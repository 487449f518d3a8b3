# bench/bench.mk -- weft's own benchmark programs and `make bench`.
#
# Included (optionally) from the top-level Makefile, after bench/peers.mk
# and bench/weft.mk / bench/hook.mk.  Defines no all/test/clean/install/
# demo rules and leaves the default goal alone.
#
#   make bench            every benchmark against its peers (~10 min on
#                         2 cores, plus up to 2 min waiting for other
#                         processes to leave the CPUs):
#                         bench/results/<date>.csv, docs/benchmarks.md,
#                         docs/img/*.png, bench/README-section.md
#   make bench QUICK=1    fewer runs, smaller counts (under a minute);
#                         writes all of that to $(BUILD)/bench/quick/
#                         instead, so the committed results are left alone
#   make bench-redis, bench-memcached, bench-apache (bench-evloop: the
#                         three; make bench runs them last unless ONLY):
#                         Debian's servers natively and under weft run
#   make bench ONLY=echo  only the benchmarks whose id matches (a regex:
#                         switch spawn parked chan_pingpong chan_buffered
#                         mutex fib sleep sleep_pthreads signals echo_100
#                         echo_1k echo_10k); output to $(BUILD)/bench/partial/
# See bench/run.py for the table of benchmarks and their peers.
#
# Binaries: $(BUILD)/bench/weft/<name> for every bench/weft/<name>.c.
# yield spawn parked fib sleep are built here; others (chan_pingpong,
# chan_buffered, mutex, echo_server) by their own fragment when it has
# landed, else by the fallback pattern rule below.

BUILD ?= build
BENCH_SAVED_GOAL := $(.DEFAULT_GOAL)

BENCH_CFLAGS := -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread -Iinclude
BENCH_LDFLAGS := -L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft -pthread
BENCH_LIB := $(BUILD)/lib/libweft.so

BENCH_OWN := yield spawn parked fib sleep
BENCH_OWN_BINS := $(BENCH_OWN:%=$(BUILD)/bench/weft/%)
# every weft benchmark program whose source exists
BENCH_WEFT_BINS := $(sort $(patsubst bench/weft/%.c,$(BUILD)/bench/weft/%,\
	$(wildcard bench/weft/*.c)))

$(BENCH_OWN_BINS): $(BUILD)/bench/weft/%: bench/weft/%.c include/weft.h $(BENCH_LIB)
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $< -o $@ $(BENCH_LDFLAGS)

# Fallback for programs whose own fragment has not landed; an explicit
# rule elsewhere takes precedence.
$(BUILD)/bench/weft/%: bench/weft/%.c include/weft.h $(BENCH_LIB) bench/bench.mk
	@mkdir -p $(@D)
	$(CC) $(BENCH_CFLAGS) $< -o $@ $(BENCH_LDFLAGS)

# A plain pthread program (no weft linked in), run natively and under the
# shim: pthread_kill to handler start (docs/preload.md, Signals).
$(BUILD)/bench/siglat: bench/siglat.c
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread $< -o $@

# A plain pthread program: a thread-per-connection server's request
# latency, natively and under the shim (bench/turnmodel.sh; docs/design.md,
# "Turns")
$(BUILD)/bench/turnmodel: bench/turnmodel.c
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread $< -o $@

.PHONY: bench-turnmodel
bench-turnmodel: $(PRELOAD_SO) $(LAUNCHER) $(BUILD)/bench/turnmodel
	BUILD=$(BUILD) bench/turnmodel.sh $(TM_CONNS)

# A plain pthread program: fork + waitpid after a thread was made, natively
# and under the shim (bench/fork.py; docs/preload.md, "fork and exec")
$(BUILD)/bench/forkcost: bench/forkcost.c
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread $< -o $@

.PHONY: bench-fork
bench-fork: $(PRELOAD_SO) $(LAUNCHER) $(BUILD)/bench/forkcost $(BUILD)/bench/floors
	BUILD=$(BUILD) python3 bench/fork.py

# The Go and Boost peers need their toolchains: install what is missing
# (make bench's own tier does it first; this covers building a peer alone).
# loadgen and the echo servers need nothing more, so make demo installs no
# Go, Boost or gnuplot.
.PHONY: bench-deps bench-weft
bench-deps:
	@scripts/deps.sh bench
$(PEERS_GO_BINS) $(BUILD)/bench/peers/boost_switch: | bench-deps

bench-weft: $(BENCH_WEFT_BINS)

# the machine's floors, printed and stored beside every run (bench/floors.c)
$(BUILD)/bench/floors: bench/floors.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) $< -o $@

# MariaDB (thread per connection) under sysbench: native, weft run, and
# MariaDB's own pool of threads (skips when mariadb-server or sysbench is
# not installed; MDB_* knobs in the script)
.PHONY: bench-mariadb
bench-mariadb: $(PRELOAD_SO) $(LAUNCHER)
	BUILD=$(BUILD) bench/mariadb.sh $(MDB_THREADS)

# Weft programs are built with -k: one that does not compile yet (another
# engineer's work in progress) shows up as "not built", the rest still run.
bench: all bench-peers $(BUILD)/bench/floors $(BUILD)/bench/siglat $(BUILD)/bench/forkcost
	@$(MAKE) --no-print-directory -k bench-weft || \
		echo "bench: some weft benchmark programs did not build; they are reported as not built" >&2
	BUILD=$(BUILD) python3 bench/run.py $(if $(filter-out 0,$(QUICK)),--quick) \
		$(if $(ONLY),--only '$(ONLY)')
	$(if $(ONLY),,BUILD=$(BUILD) python3 bench/startup.py $(if $(filter-out 0,$(QUICK)),1 50,5 200))
	$(if $(ONLY),,BUILD=$(BUILD) python3 bench/fork.py $(if $(filter-out 0,$(QUICK)),1 100,5 300))
	$(if $(ONLY),,@$(MAKE) --no-print-directory bench-evloop)

# What `weft run` costs a tree of short programs: sh -c '200 x /bin/true'
# natively, under weft run (lazy start), WEFT_START=eager, --no-children
# (docs/preload.md, Start-up); part of make bench
.PHONY: bench-startup
bench-startup: $(PRELOAD_SO) $(LAUNCHER)
	BUILD=$(BUILD) python3 bench/startup.py

# Event-loop servers from Debian, natively and under weft run in one run,
# side by side as ratios (each skips when its programs are not installed):
# redis-server + redis-benchmark, memcached + memaslap, apache2 mpm_worker
# without keep-alive + ab (req/s and system calls per request, with perf).
# QUICK=1: one run each, fewer requests.
EVLOOP_ENV = BUILD=$(BUILD) $(if $(filter-out 0,$(QUICK)),RUNS=1 N=20000 X=20000 CONNS=256)
.PHONY: bench-evloop bench-redis bench-memcached bench-apache
bench-evloop: bench-redis bench-memcached bench-apache
bench-redis: $(PRELOAD_SO) $(LAUNCHER)
	$(EVLOOP_ENV) bench/redis.sh
bench-memcached: $(PRELOAD_SO) $(LAUNCHER)
	$(EVLOOP_ENV) bench/memcached.sh
bench-apache: $(PRELOAD_SO) $(LAUNCHER)
	$(EVLOOP_ENV) bench/apache.sh

.DEFAULT_GOAL := $(BENCH_SAVED_GOAL)
