#ifndef C_OAUTHFLOW_OPENSSL_SHIM_H
#define C_OAUTHFLOW_OPENSSL_SHIM_H

#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <errno.h>
#include <stddef.h>
#include <sys/random.h>

/* OPENSSL_free is a macro; Swift cannot call macros. */
static inline void c_oauthflow_free(void *pointer) { OPENSSL_free(pointer); }

/* EVP_PKEY_PUBLIC_KEY is a compound macro that Swift does not import. */
static inline int c_oauthflow_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

/*
 * SHA-256 through libcrypto's one-shot SHA256_Init/Update/Final: no EVP_MD_CTX and no provider
 * context to allocate, which costs more than hashing a PKCE verifier. Deprecated in OpenSSL 3 for
 * new algorithms' sake, still exported, and the same implementation EVP's default provider runs.
 * Returns 1 on success.
 */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
static inline int c_oauthflow_sha256(const void *data, size_t count, unsigned char out[32]) {
    SHA256_CTX context;
    int ok = SHA256_Init(&context) == 1 && SHA256_Update(&context, data, count) == 1 && SHA256_Final(out, &context) == 1;
    OPENSSL_cleanse(&context, sizeof context);
    return ok;
}
#pragma GCC diagnostic pop

/*
 * Fills `buffer` from the kernel's CSPRNG (getrandom(2), which also seeds OpenSSL's DRBG): one
 * system call for a small request, no lock. Returns 0 when filled, -1 when getrandom is not
 * available or failed (the caller then uses RAND_bytes).
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

#endif
