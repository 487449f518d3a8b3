# tools.mk - the test suite under ThreadSanitizer, valgrind and gdb
# (docs/stacks.md); included by the Makefile after its own rules.
#
#   make test SAN=thread   the suites under TSan, on tests/shim's stand-in
#                          for Criterion (which cannot start under TSan)
#   make test-valgrind     a fast subset under valgrind memcheck
#   make test-gdb          tools/weft-gdb.py checked by gdb in batch mode
#                          (also part of make test)

# ---- ThreadSanitizer, valgrind: the Criterion stand-in -----------------------------
# Criterion cannot start under TSan (tests/shim/criterion/criterion.h says
# why), and under valgrind its fork+exec workers would each need
# --trace-children; the stand-in forks plainly, which both follow.
ifneq ($(filter thread,$(subst $(comma), ,$(SAN)))$(VALGRIND),)
TEST_CFLAGS += -Itests/shim
TEST_LDFLAGS := $(filter-out -lcriterion,$(TEST_LDFLAGS))
$(TEST_BIN): tests/shim/criterion/criterion.h
endif
# libweft is preloaded so that its libc hooks come before TSan's
# interceptors of the same functions: TSan ignores every atomic operation
# made inside an intercepted blocking call (BlockingCall raises
# ignore_interceptors), so a G parking inside read() or usleep() reached
# through TSan's interceptor would hide the runtime's locks from it and
# make it report races on everything they protect.  Preloaded, the hook
# runs first and calls TSan's interceptor only for the system call itself.
#
# What runs: every suite and every test, with halt_on_error=1 (a report
# fails its test) and tests/tsan.supp (mutex reports from jemalloc's own
# functions in a fork child; no data race is suppressed), except:
#
# WEFT_TSAN_SKIP: tests that cannot work under TSan, not races:
#  - TSan counts each fiber - each G that has started and not ended -
#    against its limit of 8128 threads and dies past it: million_parked
#    parks a million Gs, overflow_canary_stacks and
#    overflow_stops_at_guard_past_the_budget park 40,000 to use up the
#    guard-page budget first;
#  - the million_once tests start a million Gs within their own 100 s
#    limit, ~10 minutes at TSan's speed;
#  - queued_gs_hold_no_stack bounds the RSS per queued G, and TSan's
#    shadow memory, several times the program's, counts in the RSS;
#  - the deadlock detector counts the process's OS threads to know
#    whether a thread outside the runtime could still wake a G; TSan runs
#    threads of its own that it cannot tell apart, so under TSan it never
#    declares a deadlock and those tests time out;
#  - dump/while_gs_switch dumps while Gs switch on every M.  A dump stops
#    each M in its SIGURG handler, but TSan defers an asynchronous signal
#    to the next atomic operation or intercepted call of the *fiber* that
#    was running when it came: if that G is switched out just then, its
#    M runs other Gs on without stopping (the handler runs when that G
#    next runs, maybe on another M), the dump's 200 ms wait runs out, and
#    it reads stacks that M is switching, which TSan reports.  (Natively
#    the handler runs as the signal arrives and every M stops; the other
#    dump tests, where Ms sleep or spin in one G, run under TSan.)
#  - faults/stack_mapping_fails_enomem, stack_wait_woken_by_cached_free
#    and retired_spare_gives_back_stacks lower RLIMIT_AS until stacks
#    cannot be mapped, which starves TSan's
#    own allocator first ("internal allocator is out of memory"); they run
#    natively and under ASan.
# and, skipped by the suites themselves:
#  - test_preload, test_preload_corpus (tests/preload/harness.h): the
#    shim replaces the pthread API, which TSan's runtime itself uses and
#    intercepts: preloaded after libtsan.so into a plain program, TSan's
#    start-up calls pthread_key_create, gets the shim's (instrumented)
#    one before TSan is initialised, and crashes (SIGSEGV in
#    __tsan_func_entry);
#  - test_stacks_split (no -fsplit-stack with sanitizers) and the gdb
#    check (plain builds only).
# Every time bound is a hang detector stretched by tests/runner.h: 10x in
# this build, times the machine's load per CPU.  A few tests allow for
# TSan (TEST_TSAN, tests/helpers.h), where starting a G (its fiber) takes
# ~1 ms and a process-wide lock: sched/nested_spawn_tree spawns 2^13 Gs
# instead of 2^17, sched/short_sleeps_under_contention runs 30 rounds
# instead of 150, sched/sleep_order_not_early gives its sleepers a longer
# head start and 5 ms steps; and the SIGQUIT tests have a plain thread
# raise() the signal in itself, which TSan handles at once (kill() goes to
# the main thread, asleep in a raw futex call, where TSan defers it).  The
# whole run takes about 3 minutes on 2 cores (build included), so CI runs
# all of it (.ci/run).  hook_kwait/readied_g_ends_kernel_wait_without_a_spare
# runs again (it was skipped in session 5: a kick's signal could come after
# its wait and, its handler deferred by TSan, end the next wait of the
# program's poll() with an EINTR; no kick outlives its wait now,
# runtime/kwait.c); under TSan it allows a few more threads (the test says
# why).
# (TEST_ENV reaches the suites through scripts/runtests.sh's "env $ENV":
# no spaces, quotes or globs in its values.)
WEFT_TSAN_SKIP ?= sched/million_parked,sched/million_once_procs1,sched/million_once_procs2,$\
	sched/queued_gs_hold_no_stack,sched/overflow_canary_stacks,$\
	sched/overflow_stops_at_guard_past_the_budget,$\
	deadlock/channels,deadlock/mutexes,deadlock/cond_sem_rwlock_waitgroup,$\
	deadlock/plain_thread_blocked_too,dump/while_gs_switch,faults/stack_mapping_fails_enomem,$\
	faults/stack_wait_woken_by_cached_free,faults/retired_spare_gives_back_stacks
# $(BUILD)/tsan.supp: tests/tsan.supp, then one "mutex:^fn$" per function
# of the jemalloc archive that calls pthread_mutex_* (tsan.supp says why).
TSAN_SUPP := $(BUILD)/tsan.supp
ifneq ($(filter thread,$(subst $(comma), ,$(SAN))),)
$(TSAN_SUPP): tests/tsan.supp $(JEMALLOC_A)
	@mkdir -p $(@D)
	{ cat tests/tsan.supp; objdump -dr $(JEMALLOC_A) | \
		awk '/^[0-9a-f]+ <.*>:$$/ { fn = substr($$2, 2, length($$2) - 3) } \
		     /R_X86_64_.*pthread_mutex_/ { print "mutex:^" fn "$$" }' | sort -u; } > $@
$(TEST_BIN): $(TSAN_SUPP)
# the same options when a suite is run by hand (build/san-thread/tests/...):
# the stand-in's __tsan_default_options; TSAN_OPTIONS still overrides
TEST_CFLAGS += -DWEFT_TSAN_SUPP='"$(abspath $(TSAN_SUPP))"'
TEST_ENV += WEFT_TEST_SKIP=$(WEFT_TSAN_SKIP)
TEST_ENV += LD_PRELOAD=$(abspath $(SO)) WEFT_TEST_UNSET_PRELOAD=1
TEST_ENV += TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(abspath $(TSAN_SUPP))$(if $(TSAN_OPTIONS),:$(TSAN_OPTIONS))
endif

# ---- valgrind memcheck -------------------------------------------------------------
# make test-valgrind builds with VALGRIND=1 (build/valgrind/: every G stack
# registered with VALGRIND_STACK_REGISTER) and runs VALGRIND_TESTS, each
# "suite-binary:filter", under memcheck.  Any error fails the run.  Tests
# that measure time (mutex starvation bound, sleep precision) are left out:
# valgrind runs one thread at a time, ~30x slower (tests/runner.h stretches
# every time bound 20x in this build, times the load).  ~1 minute on 2 cores.
VALGRIND_TESTS ?= test_stacks:stacks/sizes* test_stacks:stacks/seg* test_chan:chan/* \
	test_sync:mutex/[bc]* test_sync:cond/* test_sync:sem/* test_sched:sched/fork_join_fib \
	test_sched:sched/errno* test_sched:sched/lock_thread* test_hook_fd:*
VALGRIND_FLAGS ?= --error-exitcode=1 --quiet --fair-sched=yes --track-origins=no \
	--show-leak-kinds=none --errors-for-leak-kinds=none

.PHONY: test-valgrind valgrind-run
test-valgrind:
	$(MAKE) VALGRIND=1 valgrind-run

ifneq ($(VALGRIND),)
VALGRIND_BIN := $(sort $(foreach t,$(VALGRIND_TESTS),$(BUILD)/tests/$(firstword $(subst :, ,$(t)))))
valgrind-run: $(VALGRIND_BIN)
	@command -v valgrind >/dev/null || { echo "weft: valgrind is not installed"; exit 1; }
	@fail=0; for t in $(VALGRIND_TESTS); do \
		bin=$${t%%:*}; filter=$${t#*:}; \
		echo "== valgrind $$bin --filter '$$filter'"; \
		valgrind $(VALGRIND_FLAGS) $(BUILD)/tests/$$bin \
			--jobs 2 --filter "$$filter" || fail=1; \
	done; \
	if [ $$fail = 0 ]; then echo "weft: valgrind: all passed"; else echo "weft: valgrind: FAILED"; exit 1; fi
endif

# ---- gdb: tools/weft-gdb.py ------------------------------------------------------
# tests/gdb/prog.c debugged by tests/gdb/run.sh; test_stacks runs it.  Plain
# builds only: TSan's and valgrind's processes are no place for gdb.
ifeq ($(SAN)$(VALGRIND),)
GDB_PROG := $(BUILD)/tests/gdb_prog
GDB_PROG_SPLIT := $(if $(filter 1,$(HAVE_SPLIT)),$(BUILD)/tests/gdb_prog_split)

$(GDB_PROG): tests/gdb/prog.c include/weft.h $(SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ -L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft -pthread

$(BUILD)/tests/gdb_prog_split: tests/gdb/prog.c include/weft.h $(SPLIT_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(SPLIT_FLAGS) $< -o $@ -L$(BUILD)/lib \
		-Wl,-rpath,$(abspath $(BUILD)/lib) -lweft_split $(SPLIT_LDFLAGS) -pthread

$(BUILD)/tests/test_stacks: tests/test_stacks.c tests/helpers.h tests/check.h $(SO) \
		$(GDB_PROG) $(GDB_PROG_SPLIT)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DWEFT_SRCDIR='"$(CURDIR)"' \
		-DWEFT_GDB_PROG='"$(abspath $(GDB_PROG))"' \
		-DWEFT_GDB_PROG_SPLIT='"$(if $(GDB_PROG_SPLIT),$(abspath $(GDB_PROG_SPLIT)))"' \
		$< -o $@ $(TEST_LDFLAGS)

.PHONY: test-gdb
test-gdb: $(GDB_PROG) $(GDB_PROG_SPLIT)
	sh tests/gdb/run.sh $(GDB_PROG) $(GDB_PROG_SPLIT)
endif

# ---- every suite ---------------------------------------------------------------------
# tests/runner.h (time bounds, skips) is part of every suite's runner.
$(TEST_BIN): tests/runner.h
