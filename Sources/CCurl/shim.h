#ifndef C_OAUTHFLOW_CURL_SHIM_H
#define C_OAUTHFLOW_CURL_SHIM_H

/*
 * libcurl for OAuthFlow's CurlTransport.
 *
 * The library is opened with dlopen on the first request, not linked: a process that never sends
 * a request (`authflow token` answering from its store) does not load libcurl and its ~30
 * dependencies. The headers give the types and constants; c_oauthflow_curl_load fills a table of
 * function pointers.
 *
 * curl_easy_setopt, curl_easy_getinfo and curl_multi_setopt are variadic, which Swift cannot call:
 * the typed wrappers below pass one argument of the right C type each.
 */

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

typedef CURLcode (*c_oauthflow_curl_setopt_fn)(CURL *, CURLoption, ...);
typedef CURLcode (*c_oauthflow_curl_getinfo_fn)(CURL *, CURLINFO, ...);
typedef CURLMcode (*c_oauthflow_curlm_setopt_fn)(CURLM *, CURLMoption, ...);

/* The libcurl entry points CurlTransport uses, resolved from one dlopen handle. */
typedef struct c_oauthflow_curl_api {
    void *library;
    CURLcode (*global_init)(long);
    curl_version_info_data *(*version_info)(CURLversion);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *);
    void (*easy_reset)(CURL *);
    CURLcode (*easy_perform)(CURL *);
    const char *(*easy_strerror)(CURLcode);
    c_oauthflow_curl_setopt_fn easy_setopt;
    c_oauthflow_curl_getinfo_fn easy_getinfo;
    struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
    void (*slist_free_all)(struct curl_slist *);
    CURLM *(*multi_init)(void);
    CURLMcode (*multi_cleanup)(CURLM *);
    CURLMcode (*multi_add_handle)(CURLM *, CURL *);
    CURLMcode (*multi_remove_handle)(CURLM *, CURL *);
    CURLMcode (*multi_socket_action)(CURLM *, curl_socket_t, int, int *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    c_oauthflow_curlm_setopt_fn multi_setopt;
    /* The URL API (libcurl 7.62 and later); NULL when this libcurl lacks it, and then unused. */
    CURLU *(*url)(void);
    void (*url_cleanup)(CURLU *);
    CURLUcode (*url_set)(CURLU *, CURLUPart, const char *, unsigned int);
} c_oauthflow_curl_api;

#define C_OAUTHFLOW_CURL_SYMBOL(field, name) \
    if ((*(void **)(&api->field) = dlsym(api->library, name)) == NULL) { goto fail; }

/* Opens libcurl.so.4 and resolves every entry point; returns 0 on success, -1 when the library or a symbol is missing. */
static inline int c_oauthflow_curl_load(c_oauthflow_curl_api *api) {
    api->library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
    if (api->library == NULL) { api->library = dlopen("libcurl.so", RTLD_NOW | RTLD_LOCAL); }
    if (api->library == NULL) { return -1; }
    C_OAUTHFLOW_CURL_SYMBOL(global_init, "curl_global_init")
    C_OAUTHFLOW_CURL_SYMBOL(version_info, "curl_version_info")
    C_OAUTHFLOW_CURL_SYMBOL(easy_init, "curl_easy_init")
    C_OAUTHFLOW_CURL_SYMBOL(easy_cleanup, "curl_easy_cleanup")
    C_OAUTHFLOW_CURL_SYMBOL(easy_reset, "curl_easy_reset")
    C_OAUTHFLOW_CURL_SYMBOL(easy_perform, "curl_easy_perform")
    C_OAUTHFLOW_CURL_SYMBOL(easy_strerror, "curl_easy_strerror")
    C_OAUTHFLOW_CURL_SYMBOL(easy_setopt, "curl_easy_setopt")
    C_OAUTHFLOW_CURL_SYMBOL(easy_getinfo, "curl_easy_getinfo")
    C_OAUTHFLOW_CURL_SYMBOL(slist_append, "curl_slist_append")
    C_OAUTHFLOW_CURL_SYMBOL(slist_free_all, "curl_slist_free_all")
    C_OAUTHFLOW_CURL_SYMBOL(multi_init, "curl_multi_init")
    C_OAUTHFLOW_CURL_SYMBOL(multi_cleanup, "curl_multi_cleanup")
    C_OAUTHFLOW_CURL_SYMBOL(multi_add_handle, "curl_multi_add_handle")
    C_OAUTHFLOW_CURL_SYMBOL(multi_remove_handle, "curl_multi_remove_handle")
    C_OAUTHFLOW_CURL_SYMBOL(multi_socket_action, "curl_multi_socket_action")
    C_OAUTHFLOW_CURL_SYMBOL(multi_info_read, "curl_multi_info_read")
    C_OAUTHFLOW_CURL_SYMBOL(multi_setopt, "curl_multi_setopt")
    *(void **)(&api->url) = dlsym(api->library, "curl_url");
    *(void **)(&api->url_cleanup) = dlsym(api->library, "curl_url_cleanup");
    *(void **)(&api->url_set) = dlsym(api->library, "curl_url_set");
    if (api->url == NULL || api->url_cleanup == NULL || api->url_set == NULL) {
        api->url = NULL; api->url_cleanup = NULL; api->url_set = NULL;
    }
    return 0;
fail:
    dlclose(api->library);
    api->library = NULL;
    return -1;
}

#undef C_OAUTHFLOW_CURL_SYMBOL

/* curl_easy_setopt with a long (flags, sizes, timeouts). */
static inline CURLcode c_oauthflow_curl_easy_setopt_long(const c_oauthflow_curl_api *api, CURL *handle, CURLoption option, long value) {
    return api->easy_setopt(handle, option, value);
}

/* curl_easy_setopt with a curl_off_t (CURLOPT_*_LARGE). */
static inline CURLcode c_oauthflow_curl_easy_setopt_off(const c_oauthflow_curl_api *api, CURL *handle, CURLoption option, curl_off_t value) {
    return api->easy_setopt(handle, option, value);
}

/* curl_easy_setopt with a string (copied by libcurl) or a data pointer. */
static inline CURLcode c_oauthflow_curl_easy_setopt_pointer(const c_oauthflow_curl_api *api, CURL *handle, CURLoption option, const void *value) {
    return api->easy_setopt(handle, option, value);
}

/* curl_easy_setopt with a write or header callback (CURLOPT_WRITEFUNCTION, CURLOPT_HEADERFUNCTION). */
static inline CURLcode c_oauthflow_curl_easy_setopt_write(const c_oauthflow_curl_api *api, CURL *handle, CURLoption option, curl_write_callback value) {
    return api->easy_setopt(handle, option, value);
}

/* curl_easy_setopt(CURLOPT_OPENSOCKETFUNCTION). */
static inline CURLcode c_oauthflow_curl_easy_setopt_opensocket(const c_oauthflow_curl_api *api, CURL *handle, curl_opensocket_callback value) {
    return api->easy_setopt(handle, CURLOPT_OPENSOCKETFUNCTION, value);
}

/* curl_easy_setopt(CURLOPT_CLOSESOCKETFUNCTION). */
static inline CURLcode c_oauthflow_curl_easy_setopt_closesocket(const c_oauthflow_curl_api *api, CURL *handle, curl_closesocket_callback value) {
    return api->easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, value);
}

/* curl_easy_getinfo for a long (CURLINFO_RESPONSE_CODE, ...). */
static inline CURLcode c_oauthflow_curl_easy_getinfo_long(const c_oauthflow_curl_api *api, CURL *handle, CURLINFO info, long *value) {
    return api->easy_getinfo(handle, info, value);
}

/* curl_easy_getinfo for a curl_off_t (CURLINFO_*_T). */
static inline CURLcode c_oauthflow_curl_easy_getinfo_off(const c_oauthflow_curl_api *api, CURL *handle, CURLINFO info, curl_off_t *value) {
    return api->easy_getinfo(handle, info, value);
}

/* curl_easy_getinfo for a pointer (CURLINFO_PRIVATE). */
static inline CURLcode c_oauthflow_curl_easy_getinfo_pointer(const c_oauthflow_curl_api *api, CURL *handle, CURLINFO info, void **value) {
    char *pointer = NULL;
    CURLcode code = api->easy_getinfo(handle, info, &pointer);
    *value = pointer;
    return code;
}

/* curl_multi_setopt with a long. */
static inline CURLMcode c_oauthflow_curl_multi_setopt_long(const c_oauthflow_curl_api *api, CURLM *multi, CURLMoption option, long value) {
    return api->multi_setopt(multi, option, value);
}

/* curl_multi_setopt with a pointer (CURLMOPT_SOCKETDATA, CURLMOPT_TIMERDATA). */
static inline CURLMcode c_oauthflow_curl_multi_setopt_pointer(const c_oauthflow_curl_api *api, CURLM *multi, CURLMoption option, void *value) {
    return api->multi_setopt(multi, option, value);
}

/* curl_multi_setopt(CURLMOPT_SOCKETFUNCTION). */
static inline CURLMcode c_oauthflow_curl_multi_setopt_socket_function(const c_oauthflow_curl_api *api, CURLM *multi, curl_socket_callback value) {
    return api->multi_setopt(multi, CURLMOPT_SOCKETFUNCTION, value);
}

/* curl_multi_setopt(CURLMOPT_TIMERFUNCTION). */
static inline CURLMcode c_oauthflow_curl_multi_setopt_timer_function(const c_oauthflow_curl_api *api, CURLM *multi, curl_multi_timer_callback value) {
    return api->multi_setopt(multi, CURLMOPT_TIMERFUNCTION, value);
}

/* The fields of a CURLMsg that Swift cannot read through its union. */
static inline CURLcode c_oauthflow_curl_msg_result(const CURLMsg *message) { return message->data.result; }

/*
 * The engine's event loop (CurlEngine.swift): an epoll set and an eventfd. struct epoll_event is
 * packed on x86-64 and <sys/epoll.h> is not in Swift's Glibc module, so the calls are wrapped here
 * and the events handed over as plain pairs.
 */

/* One ready descriptor: its epoll event bits and the descriptor registered with them. */
typedef struct c_oauthflow_event {
    uint32_t events;
    int32_t fd;
} c_oauthflow_event;

/* The epoll event bits the engine uses. */
static const uint32_t c_oauthflow_epollin = EPOLLIN;
static const uint32_t c_oauthflow_epollout = EPOLLOUT;
static const uint32_t c_oauthflow_epollerr = EPOLLERR;
static const uint32_t c_oauthflow_epollhup = EPOLLHUP;
static const uint32_t c_oauthflow_epollrdhup = EPOLLRDHUP;
static const uint32_t c_oauthflow_epollet = EPOLLET;

/* epoll_create1(EPOLL_CLOEXEC). */
static inline int c_oauthflow_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

/* epoll_ctl for `fd` with `events`, the descriptor itself as the event's data; 0, or errno. */
static inline int c_oauthflow_epoll_ctl(int epoll, int op, int fd, uint32_t events) {
    struct epoll_event event;
    event.events = events;
    event.data.u64 = 0;
    event.data.fd = fd;
    return epoll_ctl(epoll, op, fd, &event) == 0 ? 0 : errno;
}

/* The epoll_ctl operations. */
static const int c_oauthflow_epoll_add = EPOLL_CTL_ADD;
static const int c_oauthflow_epoll_mod = EPOLL_CTL_MOD;
static const int c_oauthflow_epoll_del = EPOLL_CTL_DEL;

/* epoll_wait for at most 64 events into `out`; the count, or -1 with errno set. */
static inline int c_oauthflow_epoll_wait(int epoll, c_oauthflow_event *out, int capacity, int timeout_ms) {
    struct epoll_event events[64];
    if (capacity > 64) { capacity = 64; }
    int count = epoll_wait(epoll, events, capacity, timeout_ms);
    for (int index = 0; index < count; index++) {
        out[index].events = events[index].events;
        out[index].fd = events[index].data.fd;
    }
    return count;
}

/* An eventfd for wake-ups: non-blocking, close-on-exec. */
static inline int c_oauthflow_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }

/*
 * Adds 1 to the eventfd's counter (a wake-up); the engine never reads it: registered edge-triggered,
 * every write is one event. Should the counter ever be full (2^64 - 2 writes), it is read back to
 * zero first. Returns 0, or errno.
 */
static inline int c_oauthflow_eventfd_signal(int fd) {
    uint64_t one = 1;
    for (int attempt = 0; attempt < 3; attempt++) {
        if (write(fd, &one, sizeof one) == (ssize_t)sizeof one) { return 0; }
        if (errno == EAGAIN) {
            uint64_t drained;
            (void)read(fd, &drained, sizeof drained);
        } else if (errno != EINTR) {
            return errno;
        }
    }
    return EAGAIN;
}

/*
 * The alarm (a timerfd in the engine's epoll set): a caller that started its transfer while the
 * engine slept arms it for libcurl's next timeout, so the engine wakes by then without being
 * signalled now. Non-blocking, close-on-exec; CLOCK_MONOTONIC, as the engine's deadlines.
 */
static inline int c_oauthflow_timerfd(void) { return timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC); }

/* Arms the alarm to expire once at `deadline` (CLOCK_MONOTONIC nanoseconds, absolute; at least 1). 0, or errno. */
static inline int c_oauthflow_timerfd_arm(int fd, uint64_t deadline) {
    struct itimerspec spec = {0};
    if (deadline == 0) { deadline = 1; }
    spec.it_value.tv_sec = (time_t)(deadline / 1000000000u);
    spec.it_value.tv_nsec = (long)(deadline % 1000000000u);
    return timerfd_settime(fd, TFD_TIMER_ABSTIME, &spec, NULL) == 0 ? 0 : errno;
}

/* Reads the alarm's expiry count, so that (registered level-triggered) it stops being readable. */
static inline void c_oauthflow_timerfd_clear(int fd) {
    uint64_t expirations;
    (void)read(fd, &expirations, sizeof expirations);
}

#endif
