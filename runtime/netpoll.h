/*
 * netpoll.h - poll descriptors: the per-fd state Gs park on.
 * Implemented in runtime/pollfd.c (table, park/ready, deadlines, close)
 * and used by hook/ (the interposed libc calls).
 */
#ifndef WEFT_NETPOLL_H
#define WEFT_NETPOLL_H

#include "runtime.h"

extern int netpoll_epfd;

/* netpoll() hands each epoll event here: tag is what pollfd.c stored in
 * epoll_event.data.u64; Gs made ready are pushed on *list (schedlink). */
void pollfd_event(uint64_t tag, uint32_t events, struct g **list);

#endif
