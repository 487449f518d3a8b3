JEMALLOC_A := /usr/lib/x86_64-linux-gnu/libjemalloc_pic.a
UNWIND_SO := /usr/lib/x86_64-linux-gnu/libunwind.so
