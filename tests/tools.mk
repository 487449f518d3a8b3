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
ifneq ($(filter thread,$(subst $(comma), ,$(SAN))),)
TEST_ENV += TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(abspath tests/tsan.supp) $(TSAN_OPTIONS)"
endif

# ---- valgrind memcheck -------------------------------------------------------------
# make test-valgrind builds with VALGRIND=1 (build/valgrind/: every G stack
# registered with VALGRIND_STACK_REGISTER) and runs VALGRIND_TESTS, each
# "suite-binary:filter", under memcheck.  Any error fails the run.
VALGRIND_TESTS ?= test_stacks:stacks/sizes* test_stacks:stacks/segmented* \
	test_chan:chan/* test_sync:mutex/* test_sync:wg/* test_sched:sched/errno* \
	test_sched:sched/sleep_order* test_sched:sched/lock_thread*
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
		WEFT_TEST_TIMEOUT_SCALE=20 valgrind $(VALGRIND_FLAGS) $(BUILD)/tests/$$bin \
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
