/* read_line: reads from fd into buffer until the data holds a newline, the buffer is full
 * (size - 1 bytes), or read(2) returns end of file or an error; then ends the data with a NUL.
 * Returns how many bytes it read (the answer line and anything after it in the last read).
 * Shared by agent-client.c and agent-load.c, which read `authflow agent`'s one-line answers. */
#ifndef AGENT_BENCH_READ_LINE_H
#define AGENT_BENCH_READ_LINE_H

#include <string.h>
#include <sys/types.h>
#include <unistd.h>

static inline size_t read_line(int fd, char *buffer, size_t size) {
    size_t used = 0;
    for (;;) {
        ssize_t got = read(fd, buffer + used, size - 1 - used);
        if (got <= 0) break;
        used += (size_t)got;
        if (memchr(buffer, '\n', used) || used == size - 1) break;
    }
    buffer[used] = 0;
    return used;
}

#endif
