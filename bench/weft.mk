# bench/weft.mk -- the channel and mutex benchmarks (issue #5), included
# from the top-level Makefile.  Each prints one line "name=value ...";
# bench/run.py runs them beside bench/go/{chanpingpong,chanbuf,mutex}.go
# and bench/peers/pthread_mutex.c.
#
#   $(BUILD)/bench/weft/chan_pingpong   unbuffered round trip, 1 P
#   $(BUILD)/bench/weft/chan_buffered   cap-128 producer -> consumer, 2 Ps
#   $(BUILD)/bench/weft/mutex           8 Gs on one weft_mutex_t

BUILD ?= build

WEFT_SYNC_BENCH := chan_pingpong chan_buffered mutex
WEFT_SYNC_BENCH_BINS := $(WEFT_SYNC_BENCH:%=$(BUILD)/bench/weft/%)

$(WEFT_SYNC_BENCH_BINS): $(BUILD)/bench/weft/%: bench/weft/%.c include/weft.h $(BUILD)/lib/libweft.so
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread -Iinclude $< -o $@ \
		-L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft -pthread
