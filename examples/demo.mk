# examples/demo.mk - "make demo", the README's first command; included by
# the Makefile.
#
#   make demo                    examples/echo_threads (plain pthreads,
#                                blocking I/O) natively and under "weft run
#                                --procs 2", 10,000 connections, side by side
#                                (median of 3 alternating runs each)
#   make demo DEMO_CONNS=19000 DEMO_SECS=5 DEMO_RUNS=1
#
# examples/demo.sh does the work (bench/echo_server_run.sh, bench/loadgen).

DEMO_CONNS ?= 10000
DEMO_SECS ?= 3
DEMO_PROCS ?= 2
DEMO_RUNS ?= 3

.PHONY: demo
demo: $(BUILD)/examples/echo_threads $(BUILD)/bench/loadgen $(PRELOAD_SO) $(LAUNCHER)
	@BUILD=$(BUILD) DEMO_CONNS=$(DEMO_CONNS) DEMO_SECS=$(DEMO_SECS) DEMO_PROCS=$(DEMO_PROCS) \
		DEMO_RUNS=$(DEMO_RUNS) examples/demo.sh
