# splitstack.mk - the split-stack variant of weft (docs/stacks.md); included
# by the Makefile after its own rules.
#
#   build/lib/libweft_split.so, .a   the runtime built with -DWEFT_SPLITSTACK:
#                                    segmented Gs (gcc -fsplit-stack)
#   build/examples/splitstack        the example, examples/splitstack/
#   build/tests/test_stacks_split    its tests, part of make test
#
# Code that runs in segmented Gs is compiled with -fsplit-stack and linked
# with gold against libweft_split:
#   cc -fsplit-stack app.c -fuse-ld=gold -lweft_split
# libweft_split itself is built without -fsplit-stack: every call into it
# (or into libc) from split-stack code gets a big segment from gold's
# __morestack_non_split.  Sanitizer builds (SAN=...) leave the variant out:
# -fsplit-stack and the sanitizers do not mix.

SPLIT_FLAGS := -fsplit-stack
SPLIT_LDFLAGS := -fsplit-stack -fuse-ld=gold
HAVE_SPLIT := $(if $(SAN),,$(shell $(CC) -fuse-ld=gold -Wl,--version 2>/dev/null | grep -q gold && echo 1))

SPLIT_OBJ := $(LIB_OBJ:$(BUILD)/obj/%=$(BUILD)/obj-split/%)
SPLIT_SO := $(BUILD)/lib/libweft_split.so
SPLIT_AR := $(BUILD)/lib/libweft_split.a
SPLIT_TEST_LDFLAGS := -L$(BUILD)/lib -Wl,-rpath,$(abspath $(BUILD)/lib) -lweft_split \
	-lcriterion -pthread $(SPLIT_LDFLAGS)

ifeq ($(HAVE_SPLIT),1)
all: $(SPLIT_SO) $(SPLIT_AR) $(BUILD)/examples/splitstack

$(BUILD)/obj-split/%.o: %.c $(HDRS) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -DWEFT_SPLITSTACK -c $< -o $@

$(BUILD)/obj-split/%.o: %.S $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(CFLAGS_LIB) -DWEFT_SPLITSTACK -c $< -o $@

$(SPLIT_SO): $(SPLIT_OBJ) $(JEMALLOC_A) $(FLAGS_STAMP)
	@mkdir -p $(@D)
	$(CC) $(SO_LDFLAGS) -o $@ $(SPLIT_OBJ) $(JEMALLOC_A) -Wl,-soname,libweft_split.so $(LIBS)

$(SPLIT_AR): $(SPLIT_OBJ) $(SPLIT_SO) $(JEMALLOC_A)
	ld -r -o $(BUILD)/obj-split/weft-all.o $(SPLIT_OBJ) $(JEMALLOC_A)
	nm -D --defined-only $(SPLIT_SO) | awk '{print $$3}' | sort -u > $(BUILD)/obj-split/weft.syms
	objcopy --keep-global-symbols=$(BUILD)/obj-split/weft.syms $(BUILD)/obj-split/weft-all.o \
		$(BUILD)/obj-split/weft-keep.o
	rm -f $@ && ar rcs $@ $(BUILD)/obj-split/weft-keep.o

$(BUILD)/examples/splitstack: examples/splitstack/deep.c include/weft.h $(SPLIT_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(SPLIT_FLAGS) $< -o $@ -L$(BUILD)/lib \
		-Wl,-rpath,$(abspath $(BUILD)/lib) -lweft_split $(SPLIT_LDFLAGS) -pthread

$(BUILD)/tests/test_stacks_split: tests/test_stacks_split.c tests/helpers.h $(SPLIT_SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) $(SPLIT_FLAGS) $< -o $@ $(SPLIT_TEST_LDFLAGS)
else
# no variant: the split-stack suite is built against libweft and reports
# every test skipped
$(BUILD)/tests/test_stacks_split: tests/test_stacks_split.c tests/helpers.h $(SO)
	@mkdir -p $(@D)
	$(CC) $(TEST_CFLAGS) -DWEFT_NO_SPLIT $< -o $@ $(TEST_LDFLAGS)
endif
-include bench/splitstack.mk
