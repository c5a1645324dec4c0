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

/* OPENSSL_free is a macro; Swift cannot call macros. */
static inline void c_oauthflow_free(void *pointer) { OPENSSL_free(pointer); }

/* EVP_PKEY_PUBLIC_KEY is a compound macro that Swift does not import. */
static inline int c_oauthflow_selection_public_key(void) { return EVP_PKEY_PUBLIC_KEY; }

#endif
