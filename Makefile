# weft - M:N green threads for C.  GNU make.
#
#   make                 build/lib/libweft.so, libweft.a (+ the preload shim, launcher)
#   make test            build and run the Criterion suite
#   make test SAN=address,undefined   the same under sanitizers (build/san-*/)
#   make bench           benchmarks side by side with their peers
#   make demo            the preloaded thread-per-connection echo server demo
#   make install PREFIX=/usr/local
#   make fresh-check     the README's two commands in a fresh Debian 12 root
#                        (scripts/fresh-debian.sh; root, debootstrap)

CC ?= cc
CXX ?= c++
PREFIX ?= /usr/local
SAN ?=
comma := ,
ifneq ($(VALGRIND),)
BUILD ?= build/valgrind
endif
ifeq ($(SAN),)
BUILD ?= build
else
BUILD ?= build/san-$(subst $(comma),-,$(SAN))
endif

WARN := -Wall -Wextra -Werror
BASEFLAGS := -O2 -g $(WARN) -pthread -fno-omit-frame-pointer
ifneq ($(SAN),)
BASEFLAGS += -fsanitize=$(SAN) -fno-sanitize-recover=all
endif
# TSan does not model atomic_thread_fence (a fence's ordering is not seen:
# false reports possible, none hidden).  gcc says so with -Wtsan only where a
# function holding a fence is inlined, so whether the build fails would
# depend on inlining; the fences stay, the warning goes (gcc only: clang does
# not know the option).
ifneq ($(findstring thread,$(SAN)),)
BASEFLAGS += $(shell $(CC) -Werror -Wno-tsan -E -x c /dev/null >/dev/null 2>&1 && echo -Wno-tsan)
endif
ifneq ($(VALGRIND),)
BASEFLAGS += -DWEFT_VALGRIND
endif
# Debian's hardening (hardening-check): stack protector, stack clash
# protection, CET markers, fortified libc calls (not with sanitizers, which
# intercept the same calls), full RELRO and immediate binding.  The shim's
# interposition does not depend on lazy binding.
HARDEN := -fstack-protector-strong -fstack-clash-protection -fcf-protection \
	$(if $(SAN),,-D_FORTIFY_SOURCE=2)
LDFLAGS_HARDEN := -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack
CFLAGS_LIB := $(BASEFLAGS) $(HARDEN) -std=gnu11 -fPIC -fvisibility=hidden -Iinclude -Iruntime
LDFLAGS_SAN := $(if $(SAN),-fsanitize=$(SAN))

# ---- dependencies ------------------------------------------------------------
# Nothing that depends on an installed package is decided before the package
# is installed: make first remakes the included $(DEPS_MK), which runs
# scripts/deps.sh for the tiers the goals need (installing, as root, what is
# missing) and records where the libraries are; then make restarts and reads
# it.  Each set of tiers has its own file, so "make test" after "make" still
# installs Criterion.  The links depend on the library files themselves: a
# library that appears or changes later relinks what uses it.
.DEFAULT_GOAL := all
space := $(subst ,, )
DEPS_TIERS := build $(if $(filter test test-gdb,$(MAKECMDGOALS)),test) \
	$(if $(filter demo,$(MAKECMDGOALS)),demo) $(if $(filter bench bench-%,$(MAKECMDGOALS)),bench) \
	$(if $(VALGRIND)$(filter test-valgrind valgrind-run,$(MAKECMDGOALS)),valgrind) \
	$(if $(filter fuzz fuzz-build fuzz-cov fuzz-replay,$(MAKECMDGOALS)),fuzz)
DEPS_MK := $(BUILD)/.deps/$(subst $(space),-,$(strip $(DEPS_TIERS))).mk
$(DEPS_MK): scripts/deps.sh
	@mkdir -p $(@D)
	@scripts/deps.sh $(DEPS_TIERS)
	@scripts/deps.sh --paths > $@.tmp && mv $@.tmp $@
ifeq ($(filter-out clean,$(MAKECMDGOALS))$(if $(MAKECMDGOALS),,all),)
JEMALLOC_A :=
else
include $(DEPS_MK)
endif

RUNTIME_SRC := $(wildcard runtime/*.c)
HOOK_SRC := $(wildcard hook/*.c)
ARCH_SRC := arch/x86_64/switch.S
LIB_OBJ := $(RUNTIME_SRC:%.c=$(BUILD)/obj/%.o) $(HOOK_SRC:%.c=$(BUILD)/obj/%.o) \
	$(ARCH_SRC:%.S=$(BUILD)/obj/%.o)
HDRS := include/weft.h $(wildcard runtime/*.h) $(wildcard hook/*.h) $(wildcard hook/preload/*.h) arch/ctx.h $(wildcard arch/x86_64/*.h)

LIBS := -ldl
# The shim alone: -fini= names no function, so it gets no DT_FINI, whose
# _fini (crti.o's, empty on x86_64, on the last page of the text) cost
# every process under weft run a page fault as it exited; destructors
# run from .fini_array as ever (docs/preload.md, Start-up)
SHIM_LDFLAGS := -Wl,-fini=weft_no_dt_fini
SO := $(BUILD)/lib/libweft.so
AR_LIB := $(BUILD)/lib/libweft.a
# the LD_PRELOAD shim: the runtime and hooks plus what only an unmodified
# program needs (main and pthreads as Gs): hook/preload/
PRELOAD_SRC := $(wildcard hook/preload/*.c)
PRELOAD_OBJ := $(PRELOAD_SRC:%.c=$(BUILD)/obj/%.o)
PRELOAD_SO := $(BUILD)/lib/libweft_preload.so
LAUNCHER := $(BUILD)/bin/weft

.PHONY: all deps test bench demo install clean fresh-check
all: $(SO) $(AR_LIB) $(if $(PRELOAD_SRC),$(PRELOAD_SO)) $(if $(wildcard tools/weft.c),$(LAUNCHER))

deps:
	@scripts/deps.sh $(DEPS_TIERS)

# Objects and links depend on the flags they were made with: a change of
# flags (or compiler) rebuilds, as a change of source does.
FLAGS_STAMP := $(BUILD)/.flags
# -z defs: a symbol no library provides is a link error, never a run-time
# "symbol lookup error" (tests/test_link.c checks the result).  Defined
# here, before FLAGS_NOW (a := variable: one defined later would be empty
# in it, and a change of link flags would not relink).
# -Bsymbolic-functions: the library's calls of its own functions (a hook
# calling weft_mutex_lock, c11.c's thrd_sleep calling nanosleep, jemalloc
# calling pthread_mutex_lock) bind to its own definitions at link time, as
# glibc's internal calls do: no symbol lookup for each at load (59 in every
# process under the shim: ~34,000 of its ~290,000 start-up instructions)
# and no PLT jump per call; data (environ, stdout) stays interposable.  Not
# with sanitizers, whose interceptors see jemalloc's pthread calls today.
SO_SYMBOLIC := $(if $(SAN),,-Wl,-Bsymbolic-functions)
SO_LDFLAGS := -shared -Wl,-z,defs -Wl,--exclude-libs,ALL $(LDFLAGS_HARDEN) $(LDFLAGS_SAN) \
	$(SO_SYMBOLIC) -pthread
FLAGS_NOW := $(CC) $(CFLAGS_LIB) | $(SO_LDFLAGS) $(SHIM_LDFLAGS) $(LIBS) | $(HARDEN) $(LDFLAGS_HARDEN)
$(shell mkdir -p $(BUILD) && { [ "$$(cat $(FLAGS_STAMP) 2>/dev/null)" = '$(FLAGS_NOW)' ] || \
	printf '%s\n' '$(FLAGS_NOW)' > $(FLAGS_STAMP); })

$(BUILD)/obj/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -c $< -o $@

$(BUILD)/obj/%.o: %.S $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -c $< -o $@

# jemalloc is linked in privately: its malloc/free stay hidden in libweft
# (SO_LDFLAGS: above, with the flags the stamp records)
$(SO): $(LIB_OBJ) $(JEMALLOC_A) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(SO_LDFLAGS) -o $@ $(LIB_OBJ) $(JEMALLOC_A) -Wl,-soname,libweft.so $(LIBS)

# the static library is one relocatable object with only weft's API (and
# hooked libc names) global, so jemalloc's malloc never leaks out
$(AR_LIB): $(LIB_OBJ) $(SO) $(JEMALLOC_A)
	@mkdir -p $(BUILD)/obj
	ld -r -o $(BUILD)/obj/weft-all.o $(LIB_OBJ) $(JEMALLOC_A)
	nm -D --defined-only $(SO) | awk '{print $$3}' | sort -u > $(BUILD)/obj/weft.syms
	objcopy --keep-global-symbols=$(BUILD)/obj/weft.syms $(BUILD)/obj/weft-all.o $(BUILD)/obj/weft-keep.o
	rm -f $@ && ar rcs $@ $(BUILD)/obj/weft-keep.o

# jemalloc's constructor initialises it as the library loads (~63,000
# instructions and a dozen system calls: /etc/malloc.conf, overcommit,
# THP, a 2 MiB chunk) in every process the shim is preloaded into, also
# the many that never allocate through it (docs/preload.md, Start-up).
# The shim links a copy without that constructor: jemalloc initialises at
# its first allocation instead (every entry point calls malloc_init).
# Its clock is the runtime's own (rt_clock_gettime, the vDSO): the shim's
# clock_gettime passes the program's calls on to the next definition -
# another interposer's, libfaketime's - which jemalloc, reading the clock
# under its own locks, must not run into (docs/design.md, "The clock").
JEMALLOC_LAZY_A := $(BUILD)/obj/jemalloc-lazy/libjemalloc_lazy.a
$(JEMALLOC_LAZY_A): $(JEMALLOC_A)
	@rm -rf $(@D) && mkdir -p $(@D)
	cd $(@D) && ar x $(abspath $(JEMALLOC_A)) && for o in *.o; do \
		objcopy --remove-section=.init_array --remove-section=.rela.init_array \
			--redefine-sym clock_gettime=rt_clock_gettime $$o; done
	ar rcs $@ $(@D)/*.o

$(PRELOAD_SO): $(LIB_OBJ) $(PRELOAD_OBJ) $(JEMALLOC_LAZY_A) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(SO_LDFLAGS) $(SHIM_LDFLAGS) -o $@ $(LIB_OBJ) $(PRELOAD_OBJ) $(JEMALLOC_LAZY_A) \
		-Wl,-soname,libweft_preload.so $(LIBS)

$(LAUNCHER): tools/weft.c $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(BASEFLAGS) $(HARDEN) -fPIE -pie -std=gnu11 -Iinclude \
		-DWEFT_LIBDIR='"$(abspath $(BUILD)/lib)"' $< -o $@ $(LDFLAGS_HARDEN)

# ---- tests ------------------------------------------------------------------
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(TEST_SRC:tests/%.c=$(BUILD)/tests/%)
TEST_CFLAGS := $(BASEFLAGS) -std=gnu11 -Iinclude
TEST_LDFLAGS := -L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft -lcriterion $(LDFLAGS_SAN) -pthread

$(BUILD)/tests/%: tests/%.c $(wildcard tests/*.h) $(SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $< -o $@ $(TEST_LDFLAGS)

# test_faults takes os_threads from the preload programs' check.h
$(BUILD)/tests/test_faults: tests/preload/check.h

# test_link checks the libraries themselves: it needs them all built
$(BUILD)/tests/test_link: TEST_CFLAGS += -DWEFT_LIBDIR='"$(abspath $(BUILD)/lib)"' \
	-DWEFT_SRCDIR='"$(CURDIR)"' -DWEFT_SAN='"$(SAN)"'
$(BUILD)/tests/test_link: $(PRELOAD_SO)

$(BUILD)/tests/test_hardening: TEST_CFLAGS += -DWEFT_LIBDIR='"$(abspath $(BUILD)/lib)"' \
	-DWEFT_BINDIR='"$(abspath $(BUILD)/bin)"'
$(BUILD)/tests/test_hardening: $(PRELOAD_SO) $(LAUNCHER)

TEST_ENV := ASAN_OPTIONS=detect_leaks=0:detect_stack_use_after_return=0 UBSAN_OPTIONS=print_stacktrace=1
test: $(TEST_BIN)
	@BUILD=$(BUILD) ENV="$(TEST_ENV)" scripts/runtests.sh $(TEST_BIN)

install: all
	install -d $(DESTDIR)$(PREFIX)/include $(DESTDIR)$(PREFIX)/lib/pkgconfig $(DESTDIR)$(PREFIX)/bin
	install -m 644 include/weft.h $(DESTDIR)$(PREFIX)/include/
	install -m 755 $(SO) $(DESTDIR)$(PREFIX)/lib/
	install -m 644 $(AR_LIB) $(DESTDIR)$(PREFIX)/lib/
	if [ -f $(PRELOAD_SO) ]; then install -m 755 $(PRELOAD_SO) $(DESTDIR)$(PREFIX)/lib/; fi
	if [ -f $(LAUNCHER) ]; then install -m 755 $(LAUNCHER) $(DESTDIR)$(PREFIX)/bin/; fi
	sed -e 's|@PREFIX@|$(PREFIX)|' weft.pc.in > $(DESTDIR)$(PREFIX)/lib/pkgconfig/weft.pc

clean:
	rm -rf build

fresh-check:
	scripts/fresh-debian.sh

include bench/peers.mk
-include bench/weft.mk bench/hook.mk bench/bench.mk
include runtime/splitstack.mk tests/tools.mk
-include tests/preload.mk examples/demo.mk tests/fuzz/fuzz.mk tests/soak/soak.mk
