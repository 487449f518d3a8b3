# examples/demo.mk - "make demo", the README's first command; included by
# the Makefile.
#
#   make demo                    examples/echo_threads (plain pthreads,
#                                blocking I/O) natively and under "weft run
#                                --procs 2", 10,000 connections, side by side
#                                (median of 3 alternating runs each); then
#                                examples/echo_stdio (the same on fdopen/
#                                fgets/fputs/fflush, line messages)
#   make demo DEMO_SERVERS=echo_stdio   one of the two only
#   make demo DEMO_CONNS=19000 DEMO_SECS=5 DEMO_RUNS=1
#
# examples/demo.sh does the work (bench/echo_server_run.sh, bench/loadgen).

DEMO_CONNS ?= 10000
DEMO_SECS ?= 3
DEMO_PROCS ?= 2
DEMO_RUNS ?= 3
DEMO_SERVERS ?= echo_threads echo_stdio

.PHONY: demo
demo: $(BUILD)/examples/echo_threads $(BUILD)/examples/echo_stdio $(BUILD)/bench/loadgen \
		$(PRELOAD_SO) $(LAUNCHER)
	@BUILD=$(BUILD) DEMO_CONNS=$(DEMO_CONNS) DEMO_SECS=$(DEMO_SECS) DEMO_PROCS=$(DEMO_PROCS) \
		DEMO_RUNS=$(DEMO_RUNS) DEMO_SERVERS="$(DEMO_SERVERS)" examples/demo.sh

$(BUILD)/examples/echo_stdio: examples/echo_stdio.c examples/echo_server.h
	@mkdir -p $(@D)
	$(CC) $(PEERS_CFLAGS) -o $@ $<
