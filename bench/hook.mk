# bench/hook.mk -- the blocking-style echo server on weft's hooks, and
# the echo comparison (included from the top-level Makefile).
#
#   $(BUILD)/bench/weft/echo_server    one G per connection, read/write
#   $(BUILD)/bench/weft/fileio         regular files: entersyscall vs a pool
#   bench-echo (phony)                 weft vs epoll vs Go at 100, 1000
#                                      and 10000 connections, one run
#                                      (ECHO_PROCS sets WEFT_MAXPROCS =
#                                      GOMAXPROCS, default 1)
#   bench-fileio (phony)               fileio's three modes, both workloads

HOOK_BENCH_SAVED_GOAL := $(.DEFAULT_GOAL)

ECHO_PROCS ?= 1
ECHO_CONNS ?= 100 1000 10000
ECHO_SECS ?= 3

$(BUILD)/bench/weft/echo_server: bench/weft/echo_server.c include/weft.h $(SO)
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -pthread -std=gnu11 -Iinclude $< -o $@ \
		-L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft

$(BUILD)/bench/weft/fileio: bench/weft/fileio.c include/weft.h $(SO)
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -pthread -std=gnu11 -Iinclude $< -o $@ \
		-L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft

.PHONY: bench-echo bench-fileio
bench-echo: $(BUILD)/bench/weft/echo_server $(BUILD)/bench/epoll_echo $(BUILD)/bench/go/echo \
		$(BUILD)/bench/loadgen
	@for c in $(ECHO_CONNS); do \
		BUILD=$(BUILD) bench/echo_server_run.sh -n weft -c $$c -d $(ECHO_SECS) -- \
			env WEFT_MAXPROCS=$(ECHO_PROCS) $(BUILD)/bench/weft/echo_server; \
		BUILD=$(BUILD) bench/echo_server_run.sh -n epoll -c $$c -d $(ECHO_SECS) -- \
			$(BUILD)/bench/epoll_echo; \
		BUILD=$(BUILD) bench/echo_server_run.sh -n go -c $$c -d $(ECHO_SECS) -- \
			env GOMAXPROCS=$(ECHO_PROCS) $(BUILD)/bench/go/echo; \
	done

bench-fileio: $(BUILD)/bench/weft/fileio
	@for w in read sync; do for m in syscall pool inline; do \
		WEFT_MAXPROCS=1 $(BUILD)/bench/weft/fileio $$m $$w 64 2; \
	done; done

.DEFAULT_GOAL := $(HOOK_BENCH_SAVED_GOAL)
