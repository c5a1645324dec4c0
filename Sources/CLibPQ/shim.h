#ifndef C_OAUTHFLOW_LIBPQ_SHIM_H
#define C_OAUTHFLOW_LIBPQ_SHIM_H

#include <libpq-fe.h>

/* A notice processor that drops server notices (such as "relation already exists, skipping"),
   so the library never writes to stderr. */
static inline void c_oauthflow_pq_ignore_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static inline void c_oauthflow_pq_silence(PGconn *conn) {
    PQsetNoticeProcessor(conn, c_oauthflow_pq_ignore_notice, 0);
}

#endif
