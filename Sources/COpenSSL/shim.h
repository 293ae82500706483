#ifndef XIGN_COPENSSL_SHIM_H
#define XIGN_COPENSSL_SHIM_H
/* PBKDF2 uses the SHA256_CTX functions, deprecated in OpenSSL 3 but kept: copying a context is what makes
 * each iteration two compressions and nothing more (XignCrypto/Primitives.swift). */
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/bn.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/x509.h>
#include <openssl/core_names.h>

/* A P-256 public key from its uncompressed point (65 bytes), checked to be on the curve. OpenSSL 3 imports
 * it several times faster than d2i_PUBKEY decodes the same key as DER (XignCrypto/P256.swift). */
static inline EVP_PKEY *xign_p256_public_key(const unsigned char *point, size_t length) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, "EC", NULL);
    if (context == NULL) return NULL;
    OSSL_PARAM parameters[] = {
        OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)"prime256v1", 0),
        OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (unsigned char *)point, length),
        OSSL_PARAM_END,
    };
    EVP_PKEY *key = NULL;
    if (EVP_PKEY_fromdata_init(context) != 1 || EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, parameters) != 1) key = NULL;
    EVP_PKEY_CTX_free(context);
    return key;
}
#endif
