#ifndef C_OAUTHFLOW_LIBPQ_SHIM_H
#define C_OAUTHFLOW_LIBPQ_SHIM_H

/*
 * libpq for OAuthFlowPostgres.
 *
 * The library is opened with dlopen on first use (the first PostgresSecretStore), not linked: a
 * process that links OAuthFlowPostgres but never opens a database store (`authflow token` on a
 * file store) does not load libpq and its ~25 dependencies (gssapi, krb5, ldap, ...). The headers
 * give the types and constants; c_oauthflow_pq_load fills a table of function pointers whose
 * types come from the prototypes themselves (__typeof__), so a mismatch cannot compile.
 *
 * <postgresql/libpq-fe.h> is Debian's path (libpq-dev); its own includes are relative to it.
 */

#include <postgresql/libpq-fe.h>
#include <dlfcn.h>
#include <stddef.h>

/* The libpq entry points the store uses, resolved from one dlopen handle. */
typedef struct c_oauthflow_pq_api {
    void *library;
    __typeof__(PQlibVersion) *libVersion;
    __typeof__(PQconnectdbParams) *connectdbParams;
    __typeof__(PQfinish) *finish;
    __typeof__(PQstatus) *status;
    __typeof__(PQerrorMessage) *errorMessage;
    __typeof__(PQsocket) *socket;
    __typeof__(PQbackendPID) *backendPID;
    __typeof__(PQconnectionNeedsPassword) *connectionNeedsPassword;
    __typeof__(PQconnectionUsedPassword) *connectionUsedPassword;
    __typeof__(PQsetNoticeProcessor) *setNoticeProcessor;
    __typeof__(PQconninfoParse) *conninfoParse;
    __typeof__(PQconninfoFree) *conninfoFree;
    __typeof__(PQsendPrepare) *sendPrepare;
    __typeof__(PQsendQueryPrepared) *sendQueryPrepared;
    __typeof__(PQgetResult) *getResult;
    __typeof__(PQisBusy) *isBusy;
    __typeof__(PQconsumeInput) *consumeInput;
    __typeof__(PQnotifies) *notifies;
    __typeof__(PQresultStatus) *resultStatus;
    __typeof__(PQresultErrorField) *resultErrorField;
    __typeof__(PQntuples) *ntuples;
    __typeof__(PQnfields) *nfields;
    __typeof__(PQgetvalue) *getvalue;
    __typeof__(PQgetlength) *getlength;
    __typeof__(PQgetisnull) *getisnull;
    __typeof__(PQclear) *clear;
    __typeof__(PQfreemem) *freemem;
} c_oauthflow_pq_api;

#define C_OAUTHFLOW_PQ_SYMBOL(field, name) \
    if ((*(void **)(&api->field) = dlsym(api->library, name)) == NULL) { goto fail; }

/* Opens `name` (NULL: libpq.so.5, then libpq.so) and resolves every entry point; returns 0 on
   success, -1 when the library or a symbol is missing. */
static inline int c_oauthflow_pq_load(c_oauthflow_pq_api *api, const char *name) {
    if (name != NULL) {
        api->library = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    } else {
        api->library = dlopen("libpq.so.5", RTLD_NOW | RTLD_LOCAL);
        if (api->library == NULL) { api->library = dlopen("libpq.so", RTLD_NOW | RTLD_LOCAL); }
    }
    if (api->library == NULL) { return -1; }
    C_OAUTHFLOW_PQ_SYMBOL(libVersion, "PQlibVersion")
    C_OAUTHFLOW_PQ_SYMBOL(connectdbParams, "PQconnectdbParams")
    C_OAUTHFLOW_PQ_SYMBOL(finish, "PQfinish")
    C_OAUTHFLOW_PQ_SYMBOL(status, "PQstatus")
    C_OAUTHFLOW_PQ_SYMBOL(errorMessage, "PQerrorMessage")
    C_OAUTHFLOW_PQ_SYMBOL(socket, "PQsocket")
    C_OAUTHFLOW_PQ_SYMBOL(backendPID, "PQbackendPID")
    C_OAUTHFLOW_PQ_SYMBOL(connectionNeedsPassword, "PQconnectionNeedsPassword")
    C_OAUTHFLOW_PQ_SYMBOL(connectionUsedPassword, "PQconnectionUsedPassword")
    C_OAUTHFLOW_PQ_SYMBOL(setNoticeProcessor, "PQsetNoticeProcessor")
    C_OAUTHFLOW_PQ_SYMBOL(conninfoParse, "PQconninfoParse")
    C_OAUTHFLOW_PQ_SYMBOL(conninfoFree, "PQconninfoFree")
    C_OAUTHFLOW_PQ_SYMBOL(sendPrepare, "PQsendPrepare")
    C_OAUTHFLOW_PQ_SYMBOL(sendQueryPrepared, "PQsendQueryPrepared")
    C_OAUTHFLOW_PQ_SYMBOL(getResult, "PQgetResult")
    C_OAUTHFLOW_PQ_SYMBOL(isBusy, "PQisBusy")
    C_OAUTHFLOW_PQ_SYMBOL(consumeInput, "PQconsumeInput")
    C_OAUTHFLOW_PQ_SYMBOL(notifies, "PQnotifies")
    C_OAUTHFLOW_PQ_SYMBOL(resultStatus, "PQresultStatus")
    C_OAUTHFLOW_PQ_SYMBOL(resultErrorField, "PQresultErrorField")
    C_OAUTHFLOW_PQ_SYMBOL(ntuples, "PQntuples")
    C_OAUTHFLOW_PQ_SYMBOL(nfields, "PQnfields")
    C_OAUTHFLOW_PQ_SYMBOL(getvalue, "PQgetvalue")
    C_OAUTHFLOW_PQ_SYMBOL(getlength, "PQgetlength")
    C_OAUTHFLOW_PQ_SYMBOL(getisnull, "PQgetisnull")
    C_OAUTHFLOW_PQ_SYMBOL(clear, "PQclear")
    C_OAUTHFLOW_PQ_SYMBOL(freemem, "PQfreemem")
    return 0;
fail:
    dlclose(api->library);
    api->library = NULL;
    return -1;
}

#undef C_OAUTHFLOW_PQ_SYMBOL

/* A notice processor that drops server notices, so the library never writes to stderr. */
static inline void c_oauthflow_pq_ignore_notice(void *arg, const char *message) {
    (void)arg;
    (void)message;
}

static inline void c_oauthflow_pq_silence(const c_oauthflow_pq_api *api, PGconn *conn) {
    api->setNoticeProcessor(conn, c_oauthflow_pq_ignore_notice, NULL);
}

#endif
