# tests/soak/soak.mk - the soak (docs/reliability.md); included by the
# Makefile.
#
#   make soak [SOAK_GIB=0.2]   tests/soak/soak.sh: both echo servers, 1, 2
#                              and 4 Ps, SOAK_GIB GiB each (the default is
#                              the CI size, about a minute on 2 CPUs)

SOAK_GIB ?= 0.2

.PHONY: soak
$(BUILD)/soak/soakclient: tests/soak/soakclient.c
	@mkdir -p $(@D)
	$(CC) -O2 -g $(WARN) -pthread -std=gnu11 $< -o $@

soak: $(BUILD)/soak/soakclient $(BUILD)/bench/weft/echo_server $(BUILD)/examples/echo_threads \
		$(PRELOAD_SO) $(LAUNCHER)
	tests/soak/soak.sh $(BUILD) $(SOAK_GIB)
