/* agent-load: N concurrent requests to `authflow agent` (Documentation/Agent.md), in one of two modes:
 *   threads  N client threads wait at one barrier, then each connects, asks for PROVIDER's token and
 *            reads the answer line (blocking calls). On 2 vCPUs this also measures the scheduler: a
 *            thread whose answer has arrived waits behind up to N-1 runnable client threads before it
 *            can read it, and the floor server has the same tail.
 *   epoll    one thread opens all N non-blocking connections as fast as it can, writing each request
 *            right after its connect, and after every connect collects the answers that are ready
 *            (epoll_wait with no timeout), then waits for the rest. All N are in flight together, and
 *            nothing but the client's own connect loop stands between an answer and its timestamp.
 *   burst    one thread first opens all N connections and waits until the server has accepted them
 *            (each one waiting for its line), then writes the N request lines as fast as it can,
 *            collecting ready answers after each write: N requests really at once, with the
 *            connection set-up out of the figure. Latency runs from just before a request's write.
 *            A burst also reports how long the writing took (write_ms) and the client's longest
 *            pause between two writes (client_pause_ms): a pause there is time the client's own CPU
 *            was taken from it, which every request in flight then carries.
 * The latency of a request is from just before its connect(2) to the answer's newline (CLOCK_MONOTONIC);
 * an error is a failed connect/write/read or an answer without "access_token". A connect that finds
 * the listen queue full (EAGAIN) is retried after the next collection and counted (retries), its
 * latency still running from the first attempt. Repeated REPEAT times. Prints RESULT lines: per repeat
 * and over all repeats, count, errors, median, p99 (nearest rank) and max in µs, and each repeat's
 * wall time. Used by scripts/bench-agent.sh (issue 19: 1,000 concurrent requests, p99 at most 5 ms,
 * 0 errors).
 *
 * usage: agent-load SOCKET PROVIDER [N=1000] [REPEAT=5] [NAME=agent] [MODE=threads|epoll|burst] */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "read-line.h"

static struct sockaddr_un address = { .sun_family = AF_UNIX };
static char request[512];
static int request_length;
static pthread_barrier_t barrier;
/* The last burst's writing time and the client's longest pause between two writes, in µs. */
static double burst_write_us, burst_pause_us;

struct slot { double micros; int error; };

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void *client(void *argument) {
    struct slot *slot = argument;
    char answer[4096];
    pthread_barrier_wait(&barrier);
    double start = now_us();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    slot->error = 1;
    if (fd >= 0 && connect(fd, (struct sockaddr *)&address, sizeof address) == 0
        && write(fd, request, (size_t)request_length) == request_length) {
        read_line(fd, answer, sizeof answer);
        slot->error = strstr(answer, "\"access_token\"") == NULL;
    }
    slot->micros = now_us() - start;
    if (fd >= 0) close(fd);
    return NULL;
}

/* One connection of the epoll mode. */
struct connection { int fd; size_t used; int done; double start; char answer[4096]; };

static int open_connection(struct connection *c, int epoll, int send_now) {
    c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->fd < 0) return -1;
    if (connect(c->fd, (struct sockaddr *)&address, sizeof address) != 0) {
        int saved = errno;
        close(c->fd);
        c->fd = -1;
        return saved == EAGAIN ? 1 : -1;   /* 1: the listen queue is full, try again */
    }
    struct epoll_event event = { .events = EPOLLIN, .data.ptr = c };
    if ((send_now && write(c->fd, request, (size_t)request_length) != request_length)
        || epoll_ctl(epoll, EPOLL_CTL_ADD, c->fd, &event) != 0) return -1;
    return 0;
}

/* Reads what has arrived on a ready connection; finishes it at the newline, end of file or an error. */
static void collect(struct connection *c, struct slot *slot, int *open) {
    for (;;) {
        ssize_t got = read(c->fd, c->answer + c->used, sizeof c->answer - 1 - c->used);
        if (got < 0 && errno == EAGAIN) return;
        if (got > 0) c->used += (size_t)got;
        if (got <= 0 || memchr(c->answer, '\n', c->used) || c->used == sizeof c->answer - 1) break;
    }
    slot->micros = now_us() - c->start;
    c->answer[c->used] = 0;
    slot->error = strstr(c->answer, "\"access_token\"") == NULL;
    close(c->fd);
    c->fd = -1;
    c->done = 1;
    (*open)--;
}

static int drain(int epoll, struct connection *connections, struct slot *slots, int *open, int timeout) {
    struct epoll_event events[256];
    int ready = epoll_wait(epoll, events, 256, timeout);
    for (int i = 0; i < ready; i++) {
        struct connection *c = events[i].data.ptr;
        collect(c, &slots[c - connections], open);
    }
    return ready;
}

/* Every slot an error until its answer comes; no connection open. */
static void reset(int n, struct slot *slots, struct connection *connections) {
    memset(connections, 0, (size_t)n * sizeof *connections);
    for (int i = 0; i < n; i++) { slots[i].error = 1; slots[i].micros = 0; connections[i].fd = -1; }
}

/* Closes what is still open (past the deadline: those stay errors) and the epoll descriptor. */
static void finish(int n, struct connection *connections, int epoll) {
    for (int i = 0; i < n; i++) if (connections[i].fd >= 0) close(connections[i].fd);
    close(epoll);
}

/* All n requests in flight from one thread; returns the number of connects retried, or -1. */
static int run_epoll(int n, struct slot *slots, struct connection *connections) {
    int epoll = epoll_create1(EPOLL_CLOEXEC), open = 0, retries = 0, next = 0;
    if (epoll < 0) return -1;
    reset(n, slots, connections);
    int *waiting = calloc((size_t)n, sizeof *waiting), waiting_count = 0;
    double deadline = now_us() + 60e6;
    while ((next < n || waiting_count > 0 || open > 0) && now_us() < deadline) {
        int index = -1;
        if (waiting_count > 0) index = waiting[--waiting_count];
        else if (next < n) { index = next++; connections[index].start = now_us(); }
        if (index >= 0) {
            int outcome = open_connection(&connections[index], epoll, 1);
            if (outcome == 0) open++;
            else if (outcome == 1) { retries++; waiting[waiting_count++] = index; drain(epoll, connections, slots, &open, 1); continue; }
            else { slots[index].micros = now_us() - connections[index].start; connections[index].done = 1;
                   if (connections[index].fd >= 0) { close(connections[index].fd); connections[index].fd = -1; } }
            drain(epoll, connections, slots, &open, 0);
        } else if (drain(epoll, connections, slots, &open, 1000) < 0 && errno != EINTR) break;
    }
    free(waiting);
    finish(n, connections, epoll);
    return retries;
}

/* All n connections opened first, then all n lines written at once; returns the connects retried, or -1. */
static int run_burst(int n, struct slot *slots, struct connection *connections) {
    int epoll = epoll_create1(EPOLL_CLOEXEC), open = 0, retries = 0;
    if (epoll < 0) return -1;
    reset(n, slots, connections);
    double deadline = now_us() + 60e6;
    for (int i = 0; i < n && now_us() < deadline; ) {
        int outcome = open_connection(&connections[i], epoll, 0);
        if (outcome == 1) { retries++; struct timespec pause = { 0, 100000 }; nanosleep(&pause, NULL); continue; }
        if (outcome == 0) open++;
        else connections[i].done = 1;
        i++;
    }
    /* Time for the server to accept them: 20 ms and 0.1 ms per connection (an epoll server accepts
       hundreds a millisecond). One not accepted yet when its line is written waits for that in its
       latency, so a short wait can only make the figure worse. */
    struct timespec settle = { 0, (long)(20 + n / 10) * 1000000L };
    nanosleep(&settle, NULL);
    double first = now_us(), last = first;
    burst_pause_us = 0;
    for (int i = 0; i < n; i++) {
        struct connection *c = &connections[i];
        if (c->done || c->fd < 0) continue;
        c->start = now_us();
        if (c->start - last > burst_pause_us) burst_pause_us = c->start - last;
        last = c->start;
        if (write(c->fd, request, (size_t)request_length) != request_length) {
            slots[i].micros = now_us() - c->start; close(c->fd); c->fd = -1; c->done = 1; open--; continue;
        }
        drain(epoll, connections, slots, &open, 0);
    }
    burst_write_us = now_us() - first;
    while (open > 0 && now_us() < deadline)
        if (drain(epoll, connections, slots, &open, 1000) < 0 && errno != EINTR) break;
    finish(n, connections, epoll);
    return retries;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *name, const char *prefix, double *values, int count, int errors) {
    qsort(values, (size_t)count, sizeof *values, compare);
    double median = count % 2 ? values[count / 2] : (values[count / 2 - 1] + values[count / 2]) / 2;
    int rank = (int)((99.0 * count + 99) / 100);   /* ceil(0.99 n) */
    printf("RESULT %s %s_count %d\nRESULT %s %s_errors %d\n", name, prefix, count, name, prefix, errors);
    printf("RESULT %s %s_median_us %.1f\nRESULT %s %s_p99_us %.1f\nRESULT %s %s_max_us %.1f\n",
           name, prefix, median, name, prefix, values[rank - 1], name, prefix, values[count - 1]);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: agent-load SOCKET PROVIDER [N] [REPEAT] [NAME] [threads|epoll|burst]\n"); return 2; }
    int n = argc > 3 ? atoi(argv[3]) : 1000, repeat = argc > 4 ? atoi(argv[4]) : 5;
    const char *name = argc > 5 ? argv[5] : "agent";
    int epoll_mode = argc > 6 && strcmp(argv[6], "epoll") == 0, burst_mode = argc > 6 && strcmp(argv[6], "burst") == 0;
    if (argc > 6 && !epoll_mode && !burst_mode && strcmp(argv[6], "threads") != 0) return 2;
    /* n descriptors open at once, besides stdio and the epoll descriptor. */
    struct rlimit limit;
    if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < (rlim_t)n + 64 && limit.rlim_max >= (rlim_t)n + 64) {
        limit.rlim_cur = (rlim_t)n + 64;
        setrlimit(RLIMIT_NOFILE, &limit);
    }
    if (n < 1 || n > 10000 || repeat < 1 || repeat > 100 || strlen(argv[1]) >= sizeof address.sun_path) return 2;
    strcpy(address.sun_path, argv[1]);
    request_length = snprintf(request, sizeof request, "{\"v\":1,\"token\":\"%s\"}\n", argv[2]);
    struct slot *slots = calloc((size_t)n, sizeof *slots);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    struct connection *connections = epoll_mode || burst_mode ? calloc((size_t)n, sizeof *connections) : NULL;
    double *all = calloc((size_t)(n * repeat), sizeof *all), *one = calloc((size_t)n, sizeof *one);
    int all_errors = 0;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    for (int r = 0; r < repeat; r++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "load_r%d", r + 1);
        if (epoll_mode || burst_mode) {
            double wall = now_us();
            int retries = epoll_mode ? run_epoll(n, slots, connections) : run_burst(n, slots, connections);
            wall = now_us() - wall;
            if (retries < 0) { fprintf(stderr, "epoll_create1 failed\n"); return 1; }
            int errors = 0;
            for (int i = 0; i < n; i++) { one[i] = all[r * n + i] = slots[i].micros; errors += slots[i].error; }
            all_errors += errors;
            report(name, prefix, one, n, errors);
            printf("RESULT %s %s_wall_ms %.2f\nRESULT %s %s_connect_retries %d\n", name, prefix, wall / 1e3, name, prefix, retries);
            if (burst_mode)
                printf("RESULT %s %s_write_ms %.2f\nRESULT %s %s_client_pause_ms %.2f\n", name, prefix, burst_write_us / 1e3,
                       name, prefix, burst_pause_us / 1e3);
            continue;
        }
        pthread_barrier_init(&barrier, NULL, (unsigned)n + 1);
        int started = 0;
        for (; started < n; started++)
            if (pthread_create(&threads[started], &attributes, client, &slots[started]) != 0) break;
        if (started < n) { fprintf(stderr, "could start only %d threads\n", started); return 1; }
        double wall = now_us();
        pthread_barrier_wait(&barrier);
        for (int i = 0; i < n; i++) pthread_join(threads[i], NULL);
        wall = now_us() - wall;
        pthread_barrier_destroy(&barrier);
        int errors = 0;
        for (int i = 0; i < n; i++) { one[i] = all[r * n + i] = slots[i].micros; errors += slots[i].error; }
        all_errors += errors;
        report(name, prefix, one, n, errors);
        printf("RESULT %s %s_wall_ms %.2f\n", name, prefix, wall / 1e3);
    }
    report(name, "load", all, n * repeat, all_errors);
    return 0;
}
