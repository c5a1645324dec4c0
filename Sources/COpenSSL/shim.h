#ifndef C_OAUTHFLOW_OPENSSL_SHIM_H
#define C_OAUTHFLOW_OPENSSL_SHIM_H

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

/* OPENSSL_free is a macro; Swift cannot call macros. */
static inline void c_oauthflow_free(void *pointer) { OPENSSL_free(pointer); }

#endif
