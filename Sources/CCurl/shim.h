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
#include <stddef.h>

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
    CURLMcode (*multi_perform)(CURLM *, int *);
    CURLMcode (*multi_poll)(CURLM *, struct curl_waitfd *, unsigned int, int, int *);
    CURLMcode (*multi_wakeup)(CURLM *);
    CURLMsg *(*multi_info_read)(CURLM *, int *);
    c_oauthflow_curlm_setopt_fn multi_setopt;
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
    C_OAUTHFLOW_CURL_SYMBOL(multi_perform, "curl_multi_perform")
    C_OAUTHFLOW_CURL_SYMBOL(multi_poll, "curl_multi_poll")
    C_OAUTHFLOW_CURL_SYMBOL(multi_wakeup, "curl_multi_wakeup")
    C_OAUTHFLOW_CURL_SYMBOL(multi_info_read, "curl_multi_info_read")
    C_OAUTHFLOW_CURL_SYMBOL(multi_setopt, "curl_multi_setopt")
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

/* The fields of a CURLMsg that Swift cannot read through its union. */
static inline CURLcode c_oauthflow_curl_msg_result(const CURLMsg *message) { return message->data.result; }

#endif
