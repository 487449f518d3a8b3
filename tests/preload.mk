# tests/preload.mk - the programs the LD_PRELOAD shim's suites run
# (tests/test_preload*.c, docs/preload.md); included by the Makefile.
#
#   $(BUILD)/tests/preload/<name>   tests/preload/<name>.c: plain pthread
#                                   programs that know nothing of weft,
#                                   built without it (and without
#                                   sanitizers, as a user's program is)

PRELOAD_TEST_SRC := $(wildcard tests/preload/*.c)
PRELOAD_TEST_PROGS := $(PRELOAD_TEST_SRC:tests/preload/%.c=$(BUILD)/tests/preload/%)
PRELOAD_SUITES := $(filter $(BUILD)/tests/test_preload%,$(TEST_BIN))

$(BUILD)/tests/preload/%: tests/preload/%.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -pthread -std=gnu11 $< -o $@ -ldl

$(PRELOAD_SUITES): tests/preload/harness.h $(PRELOAD_TEST_PROGS) $(PRELOAD_SO) $(LAUNCHER)
$(PRELOAD_SUITES): TEST_CFLAGS += -Itests -DPRELOAD_SRCDIR='"$(abspath tests/preload)"' \
	-DPRELOAD_SAN='"$(SAN)"'
