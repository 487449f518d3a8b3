/*
 * pollfd.c - poll descriptors (placeholder until the hook layer lands:
 * no fd is registered with epoll yet, so there are no events to route).
 */
#include "runtime.h"
#include "netpoll.h"

void pollfd_event(uint64_t tag, uint32_t events, struct g **list)
{
	(void)tag;
	(void)events;
	(void)list;
}
