# tests/preload.mk - the programs the LD_PRELOAD shim's suites run
# (tests/test_preload*.c, docs/preload.md); included by the Makefile.
#
#   $(BUILD)/tests/preload/<name>   tests/preload/<name>.c: plain pthread
#                                   programs that know nothing of weft,
#                                   built without it (and without
#                                   sanitizers, as a user's program is)

PRELOAD_TEST_SRC := $(wildcard tests/preload/*.c)
PRELOAD_TEST_PROGS := $(PRELOAD_TEST_SRC:tests/preload/%.c=$(BUILD)/tests/preload/%)
# C++ programs (g++), and the library tls.c dlopens
PRELOAD_TEST_CXX := $(wildcard tests/preload/*.cc)
PRELOAD_TEST_PROGS += $(PRELOAD_TEST_CXX:tests/preload/%.cc=$(BUILD)/tests/preload/%) \
	$(BUILD)/tests/preload/libtlsmod.so $(BUILD)/tests/preload/libtlsie.so \
	$(BUILD)/tests/preload/libdlthr.so $(BUILD)/tests/preload/libdlthrb.so \
	$(BUILD)/tests/preload/libfakeclock.so
PRELOAD_SUITES := $(filter $(BUILD)/tests/test_preload%,$(TEST_BIN))

$(BUILD)/tests/preload/%: tests/preload/%.c $(wildcard tests/preload/*.h) tests/clockns.h
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) $(PRELOAD_PROG_CFLAGS) -pthread -std=gnu11 $< -o $@ -ldl

$(BUILD)/tests/preload/%: tests/preload/%.cc
	@mkdir -p $(@D)
	$(CXX) -O2 -g -Wall -Wextra -Werror -pthread $< -o $@

$(BUILD)/tests/preload/libtlsmod.so: tests/preload/lib/tlsmod.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -fPIC -shared $< -o $@

# fakeclock.c's clock interposer (a stand-in for libfaketime)
$(BUILD)/tests/preload/libfakeclock.so: tests/preload/lib/fakeclock.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -fPIC -shared $< -o $@ -ldl

# the same with initial-exec TLS: dlopen puts it in glibc's static surplus
$(BUILD)/tests/preload/libtlsie.so: tests/preload/lib/tlsmod.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -fPIC -shared -ftls-model=initial-exec $< -o $@

# dlthread.c's libraries: libdlthrb.so's relocation runs libdlthr.so's
# IFUNC resolver (its dependency, relocated first), inside the dlopen
$(BUILD)/tests/preload/libdlthr.so: tests/preload/lib/dlthr.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -fPIC -shared -pthread $< -o $@

$(BUILD)/tests/preload/libdlthrb.so: tests/preload/lib/dlthrb.c $(BUILD)/tests/preload/libdlthr.so
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -fPIC -shared $< -o $@ -L$(@D) -ldlthr -Wl,-rpath,'$$ORIGIN'

# tls.c checks that a G's TCB carries the stack protector's canary
$(BUILD)/tests/preload/tls: PRELOAD_PROG_CFLAGS := -fstack-protector-all

$(PRELOAD_SUITES): tests/preload/harness.h $(PRELOAD_TEST_PROGS) $(PRELOAD_SO) $(LAUNCHER)
$(PRELOAD_SUITES): TEST_CFLAGS += -Itests -DPRELOAD_SRCDIR='"$(abspath tests/preload)"' \
	-DPRELOAD_SAN='"$(SAN)"'
