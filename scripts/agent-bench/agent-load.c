/* agent-load: N concurrent clients of `authflow agent` (Documentation/Agent.md), each a thread that
 * waits at one barrier, then connects, asks for PROVIDER's token and reads the answer line. The
 * latency of a request is from just before its connect(2) to the answer's newline (CLOCK_MONOTONIC);
 * an error is a failed connect/write/read or an answer without "access_token". Repeated REPEAT times.
 * Prints RESULT lines: per repeat and over all repeats, count, errors, median, p99 (nearest rank)
 * and max in µs, and each repeat's wall time. Used by scripts/bench-agent.sh (issue 19: 1,000
 * concurrent requests, p99 at most 5 ms, 0 errors).
 *
 * usage: agent-load SOCKET PROVIDER [N=1000] [REPEAT=5] [NAME=agent] */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

static struct sockaddr_un address = { .sun_family = AF_UNIX };
static char request[512];
static int request_length;
static pthread_barrier_t barrier;

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
        size_t used = 0;
        for (;;) {
            ssize_t got = read(fd, answer + used, sizeof answer - 1 - used);
            if (got <= 0) break;
            used += (size_t)got;
            if (memchr(answer, '\n', used) || used == sizeof answer - 1) break;
        }
        answer[used] = 0;
        slot->error = strstr(answer, "\"access_token\"") == NULL;
    }
    slot->micros = now_us() - start;
    if (fd >= 0) close(fd);
    return NULL;
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
    if (argc < 3) { fprintf(stderr, "usage: agent-load SOCKET PROVIDER [N] [REPEAT] [NAME]\n"); return 2; }
    int n = argc > 3 ? atoi(argv[3]) : 1000, repeat = argc > 4 ? atoi(argv[4]) : 5;
    const char *name = argc > 5 ? argv[5] : "agent";
    if (n < 1 || n > 10000 || repeat < 1 || repeat > 100 || strlen(argv[1]) >= sizeof address.sun_path) return 2;
    strcpy(address.sun_path, argv[1]);
    request_length = snprintf(request, sizeof request, "{\"v\":1,\"token\":\"%s\"}\n", argv[2]);
    struct slot *slots = calloc((size_t)n, sizeof *slots);
    pthread_t *threads = calloc((size_t)n, sizeof *threads);
    double *all = calloc((size_t)(n * repeat), sizeof *all), *one = calloc((size_t)n, sizeof *one);
    int all_errors = 0;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setstacksize(&attributes, 64 * 1024);
    for (int r = 0; r < repeat; r++) {
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
        char prefix[32];
        snprintf(prefix, sizeof prefix, "load_r%d", r + 1);
        report(name, prefix, one, n, errors);
        printf("RESULT %s %s_wall_ms %.2f\n", name, prefix, wall / 1e3);
    }
    report(name, "load", all, n * repeat, all_errors);
    return 0;
}
