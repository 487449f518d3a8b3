# bench/splitstack.mk - the segmented-stack benchmarks (issue #6), included
# from runtime/splitstack.mk.  Built with -fsplit-stack and gold against
# libweft_split; each prints "splitstack_<what> key=value ...".
#
#   make bench-splitstack [QUICK=1]
#   $(BUILD)/bench/weft/splitstack_rss      RSS, page tables, mappings per parked G
#   $(BUILD)/bench/weft/splitstack_call     a call within / across a segment
#   $(BUILD)/bench/weft/splitstack_switch   G switch with / without the context swap

SPLIT_BENCH := splitstack_rss splitstack_call splitstack_switch
SPLIT_BENCH_BINS := $(SPLIT_BENCH:%=$(BUILD)/bench/weft/%)

.PHONY: bench-splitstack
ifeq ($(HAVE_SPLIT),1)
$(SPLIT_BENCH_BINS): $(BUILD)/bench/weft/%: bench/weft/%.c include/weft.h $(SPLIT_SO)
	@mkdir -p $(@D)
	$(CC) -O2 -g -Wall -Wextra -Werror -std=gnu11 -pthread -Iinclude $(SPLIT_FLAGS) $< -o $@ \
		-L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft_split $(SPLIT_LDFLAGS) -pthread

bench-splitstack: $(SPLIT_BENCH_BINS)
	@for b in $(SPLIT_BENCH_BINS); do $(if $(QUICK),QUICK=1) $$b || exit 1; done
else
bench-splitstack:
	@echo "bench-splitstack: no split-stack variant in this build (gold, SAN=)"
endif
