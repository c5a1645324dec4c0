/* agent-client: one token from `authflow agent` over its Unix socket (Documentation/Agent.md,
 * protocol version 1), printed with a newline; what a program in any language does, at the least
 * start-up cost (a static-free C binary: no interpreter, no runtime). Used by scripts/bench-agent.sh.
 *
 * usage: agent-client SOCKET PROVIDER     exit 0: the token printed; 1: an error answer or I/O failure */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "read-line.h"

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: agent-client SOCKET PROVIDER\n"); return 2; }
    struct sockaddr_un address = { .sun_family = AF_UNIX };
    if (strlen(argv[1]) >= sizeof address.sun_path) { fprintf(stderr, "socket path too long\n"); return 2; }
    strcpy(address.sun_path, argv[1]);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&address, sizeof address) != 0) { perror("connect"); return 1; }
    char request[512];
    int length = snprintf(request, sizeof request, "{\"v\":1,\"token\":\"%s\"}\n", argv[2]);
    if (length <= 0 || length >= (int)sizeof request || write(fd, request, (size_t)length) != length) { perror("write"); return 1; }
    static char answer[65536];
    read_line(fd, answer, sizeof answer);
    close(fd);
    const char *key = "\"access_token\":\"";
    char *start = strstr(answer, key);
    if (!start) { fprintf(stderr, "agent answered: %s", answer); return 1; }
    start += strlen(key);
    char *end = strchr(start, '"');   /* a token has no quote or backslash (RFC 6750 b64token) */
    if (!end) { fprintf(stderr, "agent answered: %s", answer); return 1; }
    *end = '\n';
    fwrite(start, 1, (size_t)(end - start + 1), stdout);
    return 0;
}
