#ifndef C_AUTHFLOW_AGENT_IO_H
#define C_AUTHFLOW_AGENT_IO_H

/*
 * The Linux calls `authflow agent`'s socket server (Sources/AuthflowAgent/SocketLoop*.swift) needs
 * that Swift's Glibc module does not show: <sys/epoll.h> is not in it, struct epoll_event is packed
 * on x86-64, and accept4(2) and malloc_trim(3) are declared only under _GNU_SOURCE (the Glibc
 * module is built without it). Headers only: everything here is in libc.
 */

#include <malloc.h>
#include <stddef.h>
#include <unistd.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

/*
 * glibc's accept4 (socklen_t is unsigned int). <sys/socket.h> is not included here: declarations
 * this module included would be attributed to it instead of Glibc (SOCK_STREAM, …) in every
 * file of the importing target.
 */
struct sockaddr;
extern int accept4(int fd, struct sockaddr *address, unsigned int *length, int flags);

/* One ready descriptor: its epoll event bits and the 64 bits registered with it. */
typedef struct c_authflow_agent_event {
    uint32_t events;
    uint64_t data;
} c_authflow_agent_event;

static const uint32_t c_authflow_agent_epollin = EPOLLIN;
static const uint32_t c_authflow_agent_epollout = EPOLLOUT;
static const uint32_t c_authflow_agent_epollerr = EPOLLERR;
static const uint32_t c_authflow_agent_epollhup = EPOLLHUP;
static const uint32_t c_authflow_agent_epollexclusive = EPOLLEXCLUSIVE;

/* epoll_create1(EPOLL_CLOEXEC): the descriptor, or -1 with errno set. */
static inline int c_authflow_agent_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/* epoll_ctl ADD (op 0), MOD (1) or DEL (2) of `fd` with `events` and `data`; 0, or -1 with errno set. */
static inline int c_authflow_agent_epoll_ctl(int epoll, int op, int fd, uint32_t events, uint64_t data) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = data;
    int operation = op == 0 ? EPOLL_CTL_ADD : op == 1 ? EPOLL_CTL_MOD : EPOLL_CTL_DEL;
    return epoll_ctl(epoll, operation, fd, &event);
}

/* epoll_wait for at most 128 events into `out`; the count, or -1 with errno set. */
static inline int c_authflow_agent_epoll_wait(int epoll, c_authflow_agent_event *out, int capacity, int timeout_ms) {
    struct epoll_event events[128];
    if (capacity > 128) capacity = 128;
    int count = epoll_wait(epoll, events, capacity, timeout_ms);
    for (int index = 0; index < count; index++) {
        out[index].events = events[index].events;
        out[index].data = events[index].data.u64;
    }
    return count;
}

/* A connection from the listening socket `fd` with `flags` (SOCK_CLOEXEC | SOCK_NONBLOCK: so a child
 * started at that instant never inherits it): the descriptor, or -1 with errno set. */
static inline int c_authflow_agent_accept(int fd, int flags) { return accept4(fd, 0, 0, flags); }

/* An eventfd for wake-ups: non-blocking, close-on-exec. */
static inline int c_authflow_agent_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/* Returns the free memory of every malloc arena to the system (malloc_trim(0)); 1 when some was. */
static inline int c_authflow_agent_malloc_trim(void) { return malloc_trim(0); }

/* glibc's sched_getaffinity, declared (like accept4 above) without <sched.h>'s _GNU_SOURCE part. */
extern int sched_getaffinity(int pid, size_t size, void *mask);

/* The CPUs this process may run on (sched_getaffinity(2): taskset, systemd's CPUAffinity=, a
 * cpuset; the first 1,024), or the CPUs online when the mask cannot be read. */
static inline int c_authflow_agent_usable_cpus(void) {
    uint64_t mask[16] = { 0 };
    if (sched_getaffinity(0, sizeof mask, mask) != 0) return (int)sysconf(_SC_NPROCESSORS_ONLN);
    int count = 0;
    for (int index = 0; index < 16; index++) count += __builtin_popcountll(mask[index]);
    return count;
}

#endif
