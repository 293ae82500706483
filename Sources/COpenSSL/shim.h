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
#endif
