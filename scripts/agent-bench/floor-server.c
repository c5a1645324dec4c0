/* floor-server: the least a server of the agent's protocol can do per connection, for
 * scripts/bench-agent.sh: the floor that agent-load's figures for `authflow agent` compare with.
 *
 * One thread, one epoll loop: accept4 (non-blocking), SO_PEERCRED (as the agent checks every
 * peer), read up to the first newline, answer one fixed line shaped like the agent's token answer,
 * close. No JSON, no access lists, no deadlines, no limits: not a server to run, only a measure of
 * what the kernel and the load generator cost on this machine.
 *
 * usage: floor-server SOCKET TOKEN     (runs until killed; the socket file is replaced) */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "floor-listen.h"

/* Reads what is there; 1 when the connection is done (answered, closed or failed), 0 to wait. */
static int serve(int fd) {
    char line[4096];
    ssize_t got = recv(fd, line, sizeof line, MSG_DONTWAIT);
    if (got < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (got > 0 && memchr(line, '\n', (size_t)got)) send(fd, answer, (size_t)answer_length, MSG_NOSIGNAL | MSG_DONTWAIT);
    else if (got > 0) return 0;   /* a line in pieces: this floor keeps no input, it waits for the newline's read */
    close(fd);
    return 1;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: floor-server SOCKET TOKEN\n"); return 2; }
    int listener = floor_listen(argv[1], argv[2], SOCK_NONBLOCK);
    if (listener < 0) return 1;
    int poller = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event event = { .events = EPOLLIN, .data.fd = listener };
    if (poller < 0 || epoll_ctl(poller, EPOLL_CTL_ADD, listener, &event) != 0) { perror("epoll"); return 1; }
    struct epoll_event events[128];
    for (;;) {
        int count = epoll_wait(poller, events, 128, -1);
        for (int i = 0; i < count; i++) {
            if (events[i].data.fd != listener) {
                serve(events[i].data.fd);   /* closing it also takes it out of the epoll set */
                continue;
            }
            for (int n = 0; n < 256; n++) {
                int fd = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
                if (fd < 0) break;
                struct ucred peer;
                socklen_t length = sizeof peer;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) != 0) { close(fd); continue; }
                if (serve(fd)) continue;
                struct epoll_event wait_for = { .events = EPOLLIN, .data.fd = fd };
                if (epoll_ctl(poller, EPOLL_CTL_ADD, fd, &wait_for) != 0) close(fd);
            }
        }
    }
}
