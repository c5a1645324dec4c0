#ifndef C_OAUTHFLOW_OPENSSL_SHIM_H
#define C_OAUTHFLOW_OPENSSL_SHIM_H

/*
 * libcrypto (OpenSSL 3) for OAuthFlow's Crypto/ files.
 *
 * The library is opened with dlopen on first use, not linked: a process that never hashes, signs,
 * verifies or encrypts (`authflow token` answering from its store) does not load libcrypto, whose
 * ~4,200 symbol relocations cost about a millisecond of every start. The headers give the types
 * and constants; c_oauthflow_crypto_load fills a table with every entry point the Swift code calls.
 * Calling a libcrypto function directly from Swift fails to link, which keeps the table complete.
 */

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <openssl/x509.h>
#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

/* EVP_PKEY_PUBLIC_KEY is a compound macro that Swift does not import. */
static inline int c_oauthflow_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/*
 * The libcrypto functions OAuthFlow calls. SHA256_Init/Update/Final are libcrypto's one-shot
 * SHA-256 (no EVP_MD_CTX and no provider context to allocate, which costs more than hashing a PKCE
 * verifier): deprecated in OpenSSL 3 for new algorithms' sake, still exported, and the same
 * implementation EVP's default provider runs.
 */
#define C_OAUTHFLOW_CRYPTO_FUNCTIONS(X) \
    X(BN_bn2binpad) \
    X(BN_free) \
    X(BN_num_bits) \
    X(ERR_clear_error) \
    X(ERR_error_string_n) \
    X(ERR_get_error) \
    X(EVP_CIPHER_CTX_ctrl) \
    X(EVP_CIPHER_CTX_free) \
    X(EVP_CIPHER_CTX_new) \
    X(EVP_CIPHER_fetch) \
    X(EVP_CIPHER_free) \
    X(EVP_DecryptFinal_ex) \
    X(EVP_DecryptInit_ex2) \
    X(EVP_DecryptUpdate) \
    X(EVP_Digest) \
    X(EVP_DigestSign) \
    X(EVP_DigestSignInit) \
    X(EVP_DigestVerify) \
    X(EVP_DigestVerifyInit) \
    X(EVP_EncryptFinal_ex) \
    X(EVP_EncryptInit_ex2) \
    X(EVP_EncryptUpdate) \
    X(EVP_MAC_CTX_free) \
    X(EVP_MAC_CTX_new) \
    X(EVP_MAC_fetch) \
    X(EVP_MAC_final) \
    X(EVP_MAC_free) \
    X(EVP_MAC_init) \
    X(EVP_MAC_update) \
    X(EVP_MD_CTX_free) \
    X(EVP_MD_CTX_new) \
    X(EVP_MD_fetch) \
    X(EVP_MD_free) \
    X(EVP_MD_get_size) \
    X(EVP_PKEY_CTX_free) \
    X(EVP_PKEY_CTX_new_from_name) \
    X(EVP_PKEY_CTX_new_from_pkey) \
    X(EVP_PKEY_CTX_set_group_name) \
    X(EVP_PKEY_CTX_set_rsa_keygen_bits) \
    X(EVP_PKEY_CTX_set_rsa_mgf1_md_name) \
    X(EVP_PKEY_CTX_set_rsa_padding) \
    X(EVP_PKEY_CTX_set_rsa_pss_saltlen) \
    X(EVP_PKEY_eq) \
    X(EVP_PKEY_free) \
    X(EVP_PKEY_fromdata) \
    X(EVP_PKEY_fromdata_init) \
    X(EVP_PKEY_generate) \
    X(EVP_PKEY_get_bits) \
    X(EVP_PKEY_get_bn_param) \
    X(EVP_PKEY_get_group_name) \
    X(EVP_PKEY_get_raw_public_key) \
    X(EVP_PKEY_is_a) \
    X(EVP_PKEY_keygen_init) \
    X(EVP_PKEY_new_raw_public_key_ex) \
    X(EVP_PKEY_public_check_quick) \
    X(EVP_aes_256_gcm) \
    X(EVP_sha256) \
    X(EVP_sha384) \
    X(EVP_sha512) \
    X(OSSL_PARAM_construct_BN) \
    X(OSSL_PARAM_construct_end) \
    X(OSSL_PARAM_construct_octet_string) \
    X(OSSL_PARAM_construct_utf8_string) \
    X(RAND_bytes) \
    X(SHA256_Init) \
    X(SHA256_Update) \
    X(SHA256_Final) \
    X(X509_free) \
    X(X509_get0_pubkey) \
    X(d2i_AutoPrivateKey) \
    X(i2d_PrivateKey) \
    X(d2i_X509)

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Every entry point of C_OAUTHFLOW_CRYPTO_FUNCTIONS, resolved from one dlopen handle. */
typedef struct c_oauthflow_crypto_api {
    /* 1 when every entry point below is set; 0 before loading or when it failed. */
    int loaded;
    /* Why loading failed (the dynamic linker's message), NUL-terminated; empty otherwise. */
    char error[512];
#define C_OAUTHFLOW_CRYPTO_FIELD(name) __typeof__(&name) name;
    C_OAUTHFLOW_CRYPTO_FUNCTIONS(C_OAUTHFLOW_CRYPTO_FIELD)
#undef C_OAUTHFLOW_CRYPTO_FIELD
} c_oauthflow_crypto_api;

#pragma GCC diagnostic pop

/*
 * Opens `soname` (libcrypto.so.3) by name, so the dynamic linker's own search finds it
 * (LD_LIBRARY_PATH, the ld.so cache, the default directories), and resolves every entry point.
 * Returns 0 on success; -1 with api->error set when the library or a symbol is missing. The
 * handle is never closed: libcrypto is marked NODELETE, and the table stays valid for the process.
 */
static inline int c_oauthflow_crypto_open(c_oauthflow_crypto_api *api, const char *soname) {
    memset(api, 0, sizeof *api);
    void *library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *reason = dlerror();
        snprintf(api->error, sizeof api->error, "%s", reason != NULL ? reason : "cannot open shared object file");
        return -1;
    }
#define C_OAUTHFLOW_CRYPTO_RESOLVE(name) \
    if ((*(void **)(&api->name) = dlsym(library, #name)) == NULL) { \
        snprintf(api->error, sizeof api->error, "%s has no %s (OAuthFlow needs OpenSSL 3)", soname, #name); \
        goto fail; \
    }
    C_OAUTHFLOW_CRYPTO_FUNCTIONS(C_OAUTHFLOW_CRYPTO_RESOLVE)
#undef C_OAUTHFLOW_CRYPTO_RESOLVE
    api->loaded = 1;
    return 0;
fail:
    dlclose(library);
    char reason[sizeof api->error];
    memcpy(reason, api->error, sizeof reason);
    memset(api, 0, sizeof *api);
    memcpy(api->error, reason, sizeof reason);
    return -1;
}

/* c_oauthflow_crypto_open of libcrypto.so.3, the OpenSSL 3 soname. */
static inline int c_oauthflow_crypto_load(c_oauthflow_crypto_api *api) { return c_oauthflow_crypto_open(api, "libcrypto.so.3"); }

/*
 * Fills `buffer` from the kernel's CSPRNG (getrandom(2), which also seeds OpenSSL's DRBG): one
 * system call for a small request, no lock, no libcrypto. Returns 0 when filled, -1 when getrandom
 * is not available or failed (the caller then uses RAND_bytes).
 */
static inline int c_oauthflow_getrandom(void *buffer, size_t count) {
    unsigned char *out = buffer;
    size_t filled = 0;
    while (filled < count) {
        ssize_t n = getrandom(out + filled, count - filled, 0);
        if (n > 0) { filled += (size_t)n; continue; }
        if (n < 0 && errno == EINTR) { continue; }
        return -1;
    }
    return 0;
}

/* Zeroes `count` bytes in a way the optimizer keeps (glibc's explicit_bzero; no libcrypto needed). */
static inline void c_oauthflow_wipe(void *buffer, size_t count) {
    if (buffer != NULL && count > 0) { explicit_bzero(buffer, count); }
}

#endif
