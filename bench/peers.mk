# bench/peers.mk -- benchmark peers and load tools (independent of weft).
#
# Included from the top-level Makefile; all paths are relative to the
# repository root.  Standalone use:  make -f bench/peers.mk bench-peers
#
# Targets:
#   $(BUILD)/bench/loadgen  $(BUILD)/bench/epoll_echo
#   $(BUILD)/examples/echo_threads
#   $(BUILD)/bench/go/<name>     gosched spawn parked fib chanpingpong
#                                chanbuf mutex echo sleep
#   $(BUILD)/bench/peers/<name>  pthread_spawn pthread_mutex
#                                pthread_pingpong pthread_parked page_touch
#                                sleep_pthreads boost_switch
#   bench-peers (phony)          all of the above

BUILD ?= build

# Rules below must not become the includer's default goal; run on its
# own (make -f bench/peers.mk), the default goal is bench-peers.
ifeq ($(words $(MAKEFILE_LIST)),1)
PEERS_SAVED_GOAL := bench-peers
else
PEERS_SAVED_GOAL := $(.DEFAULT_GOAL)
endif

GO ?= go

PEERS_CFLAGS := -O2 -g -Wall -Wextra -Werror -pthread
PEERS_CXXFLAGS := -O2 -g -Wall -Wextra -Werror -pthread
PEERS_BOOST_LIBS := -lboost_fiber -lboost_context

# Offline, module-free Go builds with every cache under $(BUILD); works
# as root with HOME unset.  Go insists on absolute cache paths.
PEERS_GO_ENV := GO111MODULE=off GOFLAGS= CGO_ENABLED=0 \
	GOCACHE=$(abspath $(BUILD))/go-cache \
	GOPATH=$(abspath $(BUILD))/gopath

PEERS_GO_NAMES := gosched spawn parked fib chanpingpong chanbuf mutex \
	echo sleep
PEERS_C_NAMES := pthread_spawn pthread_mutex pthread_pingpong \
	pthread_parked sleep_pthreads page_touch

PEERS_GO_BINS := $(PEERS_GO_NAMES:%=$(BUILD)/bench/go/%)
PEERS_C_BINS := $(PEERS_C_NAMES:%=$(BUILD)/bench/peers/%)
PEERS_BINS := $(BUILD)/bench/loadgen $(BUILD)/bench/epoll_echo \
	$(BUILD)/examples/echo_threads $(PEERS_GO_BINS) $(PEERS_C_BINS) \
	$(BUILD)/bench/peers/boost_switch

.PHONY: bench-peers
bench-peers: $(PEERS_BINS)

$(BUILD)/bench/loadgen: bench/loadgen.c
	@mkdir -p $(@D)
	$(CC) $(PEERS_CFLAGS) -o $@ $<

$(BUILD)/bench/epoll_echo: bench/epoll_echo.c
	@mkdir -p $(@D)
	$(CC) $(PEERS_CFLAGS) -o $@ $<

$(BUILD)/examples/echo_threads: examples/echo_threads.c examples/echo_server.h
	@mkdir -p $(@D)
	$(CC) $(PEERS_CFLAGS) -o $@ $<

$(PEERS_C_BINS): $(BUILD)/bench/peers/%: bench/peers/%.c
	@mkdir -p $(@D)
	$(CC) $(PEERS_CFLAGS) -o $@ $<

$(BUILD)/bench/peers/boost_switch: bench/peers/boost_switch.cpp
	@mkdir -p $(@D)
	$(CXX) $(PEERS_CXXFLAGS) -o $@ $< $(PEERS_BOOST_LIBS)

# Each Go peer is a single-file main package.
$(PEERS_GO_BINS): $(BUILD)/bench/go/%: bench/go/%.go
	@mkdir -p $(@D)
	env $(PEERS_GO_ENV) $(GO) build -o $@ $<

.DEFAULT_GOAL := $(PEERS_SAVED_GOAL)
