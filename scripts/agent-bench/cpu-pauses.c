/* cpu-pauses: how often this machine takes a CPU away from a program that never sleeps, for
 * scripts/bench-agent.sh. Pinned to CPU, it reads CLOCK_MONOTONIC in a loop for SECONDS and counts
 * the pauses between two readings of at least 1 ms and of at least 5 ms, their total and the
 * longest. Run it on every CPU at once with nothing else running: each pause is then the CPU given
 * to another task of the system or, in a virtual machine, the virtual CPU not running at all. A
 * pause on the server's or the client's CPU during a burst of agent-load is carried by every
 * request in flight, so it bounds the p99 that any server can reach on the machine at that time.
 *
 * usage: cpu-pauses CPU SECONDS   (prints RESULT lines named cpuCPU) */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: cpu-pauses CPU SECONDS\n"); return 2; }
    int cpu = atoi(argv[1]);
    double seconds = atof(argv[2]);
    if (cpu < 0 || cpu >= CPU_SETSIZE || seconds <= 0 || seconds > 600) return 2;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) { perror("sched_setaffinity"); return 1; }
    double start = now_us(), last = start, end = start + seconds * 1e6, paused = 0, longest = 0;
    long over1 = 0, over5 = 0;
    while (last < end) {
        double now = now_us(), gap = now - last;
        if (gap >= 1000) { over1++; paused += gap; }
        if (gap >= 5000) over5++;
        if (gap > longest) longest = gap;
        last = now;
    }
    printf("RESULT cpu%d pauses_1ms_per_s %.1f\nRESULT cpu%d pauses_5ms_per_s %.2f\n", cpu, over1 / seconds, cpu, over5 / seconds);
    printf("RESULT cpu%d paused_percent %.2f\nRESULT cpu%d longest_pause_ms %.1f\n", cpu, paused / (seconds * 1e4), cpu, longest / 1e3);
    return 0;
}
