/* uring-floor-server: floor-server.c's work done through io_uring, for scripts/agent-bench/burst-ab.sh:
 * whether a server that batches its system calls can get under the floor an epoll server sets.
 *
 * One thread, one ring (IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN: completions are
 * run only when the thread waits, so a client's writes do not wake it one by one). A multishot
 * accept; per connection SO_PEERCRED (a plain getsockopt, as the agent and floor-server do), a recv
 * up to the first newline, then one fixed answer linked to the close. Between two waits every answer
 * and close goes to the kernel in one io_uring_enter. Not a server to run: no limits, no deadlines,
 * no JSON.
 *
 * Build: gcc -O2 -o uring-floor-server uring-floor-server.c -luring   (Debian: liburing-dev)
 * usage: uring-floor-server SOCKET TOKEN     (runs until killed; the socket file is replaced) */
#define _GNU_SOURCE
#include <liburing.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor-listen.h"

enum { ACCEPT = 1, RECV = 2, SEND = 3, CLOSE = 4, MAX_FD = 4096 };
static char lines[MAX_FD][512];
static struct io_uring ring;

static struct io_uring_sqe *next_sqe(void) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
    if (!sqe) { io_uring_submit(&ring); sqe = io_uring_get_sqe(&ring); }
    return sqe;
}

static void queue(int fd, int kind) {
    struct io_uring_sqe *sqe = next_sqe();
    switch (kind) {
    case ACCEPT: io_uring_prep_multishot_accept(sqe, fd, NULL, NULL, SOCK_CLOEXEC); break;
    case RECV: io_uring_prep_recv(sqe, fd, lines[fd], sizeof lines[fd], 0); break;
    case SEND: io_uring_prep_send(sqe, fd, answer, (size_t)answer_length, MSG_NOSIGNAL);
               sqe->flags |= IOSQE_IO_HARDLINK | IOSQE_CQE_SKIP_SUCCESS; break;   /* the close runs either way */
    case CLOSE: io_uring_prep_close(sqe, fd); sqe->flags |= IOSQE_CQE_SKIP_SUCCESS; break;
    }
    io_uring_sqe_set_data64(sqe, ((uint64_t)fd << 8) | (uint64_t)kind);
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: uring-floor-server SOCKET TOKEN\n"); return 2; }
    int listener = floor_listen(argv[1], argv[2], 0);
    if (listener < 0) return 1;
    struct io_uring_params params = { .flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN };
    int failure = io_uring_queue_init_params(4096, &ring, &params);
    if (failure < 0) { fprintf(stderr, "io_uring: %s\n", strerror(-failure)); return 1; }
    queue(listener, ACCEPT);
    for (;;) {
        io_uring_submit_and_wait(&ring, 1);
        struct io_uring_cqe *cqe;
        unsigned head, seen = 0;
        io_uring_for_each_cqe(&ring, head, cqe) {
            seen++;
            uint64_t data = io_uring_cqe_get_data64(cqe);
            int kind = (int)(data & 0xff), fd = (int)(data >> 8), result = cqe->res;
            if (kind == ACCEPT) {
                if (result >= MAX_FD) close(result);
                else if (result >= 0) {
                    struct ucred peer;
                    socklen_t length = sizeof peer;
                    if (getsockopt(result, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) close(result);
                    else queue(result, RECV);
                }
                if (!(cqe->flags & IORING_CQE_F_MORE)) queue(listener, ACCEPT);
            } else if (kind == RECV) {
                if (result > 0 && memchr(lines[fd], '\n', (size_t)result)) { queue(fd, SEND); queue(fd, CLOSE); }
                else if (result > 0) queue(fd, RECV);   /* a line in pieces: like floor-server, wait for the newline's read */
                else queue(fd, CLOSE);
            }
        }
        io_uring_cq_advance(&ring, seen);
    }
}
