/* floor_listen: what floor-server.c and uring-floor-server.c both do first. Formats their one
 * fixed answer (a line shaped like `authflow agent`'s token answer, with TOKEN) into `answer`,
 * replaces the socket file at PATH, and listens there (backlog 1,024, as the agent).
 * Returns the listening descriptor, or -1 after saying why on standard error. */
#ifndef AGENT_BENCH_FLOOR_LISTEN_H
#define AGENT_BENCH_FLOOR_LISTEN_H

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char answer[512];
static int answer_length;

static inline int floor_listen(const char *path, const char *token, int socket_flags) {
    answer_length = snprintf(answer, sizeof answer,
        "{\"v\":1,\"access_token\":\"%s\",\"token_type\":\"Bearer\",\"expires_at\":1767225600,\"scopes\":[]}\n", token);
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    if (answer_length <= 0 || answer_length >= (int)sizeof answer || strlen(path) >= sizeof address.sun_path) {
        fprintf(stderr, "the token or the socket path is too long\n");
        return -1;
    }
    strcpy(address.sun_path, path);
    unlink(path);
    int listener = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | socket_flags, 0);
    if (listener < 0 || bind(listener, (struct sockaddr *)&address, sizeof address) != 0 || listen(listener, 1024) != 0) {
        perror("listen");
        return -1;
    }
    return listener;
}

#endif
