# tests/fuzz/fuzz.mk - the differential hook fuzzer (docs/reliability.md);
# included by the Makefile.
#
#   make fuzz [FUZZ_S=120] [FUZZ_JOBS=1]
#                            run tests/fuzz/hookdiff.c under libFuzzer for
#                            FUZZ_S seconds, in FUZZ_JOBS processes (each
#                            on a CPU of its own, sharing the corpus); new
#                            inputs go to $(BUILD)/fuzz/corpus, findings
#                            (crash-*) to $(BUILD)/fuzz/
#   make fuzz-build          only build $(BUILD)/fuzz/hookdiff
#   make fuzz-replay         every committed input once (fails on a finding)
#   make fuzz-cov            line coverage of hook/ and pollfd.c by the corpus
#
# libFuzzer (clang -fsanitize=fuzzer, Debian's libclang-rt-14-dev) rather
# than AFL++: it runs in process, so the three runs of an input share one
# started runtime and cost a few ms, not a fork and exec.  weft's objects
# are rebuilt with clang and coverage instrumentation and linked into the
# fuzzer itself (one relocatable object, only weft's API and the hooked
# libc names global, as libweft.a), so the fuzzer's own calls to read,
# poll, ... are the hooks, and its plain runs call glibc's through dlsym.

FUZZ_CC ?= clang
FUZZ_S ?= 120
FUZZ_JOBS ?= 1
FUZZ_DIR := $(BUILD)/fuzz
FUZZ_OBJ := $(LIB_OBJ:$(BUILD)/obj/%=$(FUZZ_DIR)/obj/%)
FUZZ_SANCOV := -fsanitize=fuzzer-no-link -fno-sanitize-coverage=trace-cmp
FUZZ_CFLAGS := -O2 -g $(WARN) -pthread -fno-omit-frame-pointer -std=gnu11 -fPIC \
	-fvisibility=hidden -Iinclude -Iruntime $(FUZZ_SANCOV)
FUZZ_BIN := $(FUZZ_DIR)/hookdiff
# The sources whose edges guide the fuzzer (make patterns; FUZZ_COVER=%:
# all of weft): the hooks and the fd waits under test.  The rest of the
# runtime (scheduler, locks, timers, sysmon) is built without coverage:
# its edges follow the machine's timing, not the input, and libFuzzer's
# per-execution bookkeeping of them (a frequency table lookup per edge
# hit) was 12-16 % of an execution's CPU (docs/reliability.md).
FUZZ_COVER ?= hook/%.c runtime/pollfd.c runtime/netpoll.c runtime/kwait.c
FUZZ_OBJ_CFLAGS = $(FUZZ_CFLAGS) $(if $(filter $(FUZZ_COVER),$<),,-fno-sanitize=fuzzer-no-link)
# rebuilt when FUZZ_COVER changes
FUZZ_COVER_STAMP := $(FUZZ_DIR)/cover-$(shell echo '$(FUZZ_COVER)' | md5sum | cut -c1-8).stamp

.PHONY: fuzz fuzz-build
fuzz-build: $(FUZZ_BIN)

$(FUZZ_COVER_STAMP):
	@mkdir -p $(@D)
	rm -f $(FUZZ_DIR)/cover-*.stamp
	touch $@

$(FUZZ_DIR)/obj/%.o: %.c $(HDRS) $(FUZZ_COVER_STAMP)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_OBJ_CFLAGS) -c $< -o $@

$(FUZZ_DIR)/obj/%.o: %.S
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

# gstate.c: the two internal questions the harness asks (is a G blocked?)
$(FUZZ_DIR)/weft-fuzz.o: $(FUZZ_OBJ) $(FUZZ_DIR)/obj/tests/fuzz/gstate.o $(SO) $(JEMALLOC_A)
	ld -r -o $(FUZZ_DIR)/weft-all.o $(FUZZ_OBJ) $(FUZZ_DIR)/obj/tests/fuzz/gstate.o $(JEMALLOC_A)
	(nm -D --defined-only $(SO) | awk '{print $$3}'; echo hookdiff_g; echo hookdiff_gblocked) | \
		sort -u > $(FUZZ_DIR)/weft.syms
	objcopy --keep-global-symbols=$(FUZZ_DIR)/weft.syms $(FUZZ_DIR)/weft-all.o $@

$(FUZZ_BIN): tests/fuzz/hookdiff.c tests/fuzz/piperoom.h include/weft.h $(FUZZ_DIR)/weft-fuzz.o
	$(FUZZ_CC) -O1 -g $(WARN) -pthread -std=gnu11 -Iinclude -fsanitize=fuzzer \
		$< $(FUZZ_DIR)/weft-fuzz.o -o $@ $(LIBS)

# -timeout: an input's runs take ms; a minute is a hang the fuzzer's own
# 10 s watchdog did not catch.  nice: it shares the machine.
# FUZZ_JOBS > 1: libFuzzer's -jobs (as many workers), N processes with the
# same corpus directory, each reloading what the others add every
# FUZZ_RELOAD seconds; each pins itself to a CPU of its own (hookdiff.c
# pin_one_cpu), so use at most the CPUs there are.  Their output goes to
# $(FUZZ_DIR)/fuzz-N.log, whose last lines are printed at the end.  One
# job reloads nothing: libFuzzer's default, every second, stats every
# file of the corpus each time (a few % of the CPU with a thousand inputs,
# more with the long runs' thousands).
FUZZ_RELOAD ?= 30
FUZZ_PAR = $(if $(filter-out 0 1,$(FUZZ_JOBS)),-jobs=$(FUZZ_JOBS) -workers=$(FUZZ_JOBS) \
	-reload=$(FUZZ_RELOAD),-reload=0)
fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	rm -f $(FUZZ_DIR)/fuzz-*.log
	cd $(FUZZ_DIR) && nice -n 19 $(abspath $(FUZZ_BIN)) $(FUZZ_PAR) -max_total_time=$(FUZZ_S) \
		-max_len=175 -timeout=60 -rss_limit_mb=4096 -print_final_stats=1 \
		-artifact_prefix=$(abspath $(FUZZ_DIR))/ $(abspath $(FUZZ_DIR)/corpus tests/fuzz/corpus)
	@for f in $(FUZZ_DIR)/fuzz-*.log; do [ -f $$f ] || continue; echo "== $$f"; \
		grep -E 'FINDING|stat::number_of_executed_units|DONE' $$f | tail -3; done

# The committed corpus (seeds and every input that found something), each
# input run once: a regression check that fails on any difference (CI).
.PHONY: fuzz-replay
fuzz-replay: $(FUZZ_BIN)
	$(FUZZ_BIN) -runs=0 -max_len=175 -timeout=60 -rss_limit_mb=4096 \
		-artifact_prefix=$(FUZZ_DIR)/ tests/fuzz/corpus

# ---- coverage of the corpus ---------------------------------------------------
#   make fuzz-cov   run every input of the corpus once through a build with
#                   clang's source coverage and print the line coverage of
#                   hook/ and runtime/pollfd.c (docs/reliability.md)
FUZZ_COV_DIR := $(BUILD)/fuzz-cov
FUZZ_COV_OBJ := $(LIB_OBJ:$(BUILD)/obj/%=$(FUZZ_COV_DIR)/obj/%)
FUZZ_COV_FLAGS := -fprofile-instr-generate -fcoverage-mapping
LLVM_COV ?= llvm-cov
LLVM_PROFDATA ?= llvm-profdata

.PHONY: fuzz-cov
$(FUZZ_COV_DIR)/obj/%.o: %.c $(HDRS)
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_COV_FLAGS) -c $< -o $@

$(FUZZ_COV_DIR)/obj/%.o: %.S
	@mkdir -p $(@D)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -c $< -o $@

$(FUZZ_COV_DIR)/weft-fuzz.o: $(FUZZ_COV_OBJ) $(FUZZ_COV_DIR)/obj/tests/fuzz/gstate.o $(SO) $(JEMALLOC_A)
	ld -r -o $(FUZZ_COV_DIR)/weft-all.o $(FUZZ_COV_OBJ) $(FUZZ_COV_DIR)/obj/tests/fuzz/gstate.o \
		$(JEMALLOC_A)
	(nm -D --defined-only $(SO) | awk '{print $$3}'; echo hookdiff_g; echo hookdiff_gblocked) | \
		sort -u > $(FUZZ_COV_DIR)/weft.syms
	objcopy --keep-global-symbols=$(FUZZ_COV_DIR)/weft.syms $(FUZZ_COV_DIR)/weft-all.o $@

$(FUZZ_COV_DIR)/hookdiff: tests/fuzz/hookdiff.c tests/fuzz/piperoom.h include/weft.h $(FUZZ_COV_DIR)/weft-fuzz.o
	$(FUZZ_CC) -O1 -g $(WARN) -pthread -std=gnu11 -Iinclude -fsanitize=fuzzer $(FUZZ_COV_FLAGS) \
		$< $(FUZZ_COV_DIR)/weft-fuzz.o -o $@ $(LIBS)

fuzz-cov: $(FUZZ_COV_DIR)/hookdiff
	@mkdir -p $(FUZZ_DIR)/corpus
	rm -f $(FUZZ_COV_DIR)/*.profraw
	LLVM_PROFILE_FILE=$(FUZZ_COV_DIR)/%p.profraw nice -n 19 $(FUZZ_COV_DIR)/hookdiff -runs=0 \
		$(FUZZ_DIR)/corpus tests/fuzz/corpus 2>&1 | tail -1
	$(LLVM_PROFDATA) merge -o $(FUZZ_COV_DIR)/all.profdata $(FUZZ_COV_DIR)/*.profraw
	$(LLVM_COV) report $(FUZZ_COV_DIR)/hookdiff -instr-profile=$(FUZZ_COV_DIR)/all.profdata \
		$(abspath $(HOOK_SRC) runtime/pollfd.c)

# the fuzzer's model of a pipe's room, checked against the kernel
$(BUILD)/tests/test_fuzz_piperoom: tests/fuzz/piperoom.h
