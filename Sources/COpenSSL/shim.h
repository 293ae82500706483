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
#include <openssl/rsa.h>
#include <openssl/core_names.h>
#include <openssl/x509v3.h>
#include <string.h>

/* Public keys from their numbers, and macros Swift does not import. The parameter names must outlive the OSSL_PARAM
 * that points at them, which Swift's bridged strings do not. */
static inline EVP_PKEY *xign_public_key_from_parameters(const char *type, OSSL_PARAM *parameters) {
    EVP_PKEY_CTX *context = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (context == NULL) return NULL;
    EVP_PKEY *key = NULL;
    if (EVP_PKEY_fromdata_init(context) != 1 || EVP_PKEY_fromdata(context, &key, EVP_PKEY_PUBLIC_KEY, parameters) != 1) key = NULL;
    EVP_PKEY_CTX_free(context);
    return key;
}
/* An RSA public key from its big-endian modulus and exponent 65537. */
static inline EVP_PKEY *xign_rsa_public_key(const unsigned char *modulus, size_t length) {
    unsigned char little_endian[512];
    if (length == 0 || length > sizeof little_endian) return NULL;
    for (size_t i = 0; i < length; i++) little_endian[i] = modulus[length - 1 - i];
    unsigned int exponent = 65537;
    OSSL_PARAM parameters[] = {
        OSSL_PARAM_BN(OSSL_PKEY_PARAM_RSA_N, little_endian, length),
        OSSL_PARAM_uint(OSSL_PKEY_PARAM_RSA_E, &exponent),
        OSSL_PARAM_END,
    };
    return xign_public_key_from_parameters("RSA", parameters);
}
/* An EC public key on `group` from its uncompressed point, checked to be on the curve. */
static inline EVP_PKEY *xign_ec_public_key(const char *group, const unsigned char *point, size_t length) {
    OSSL_PARAM parameters[] = {
        OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, (char *)group, 0),
        OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, (unsigned char *)point, length),
        OSSL_PARAM_END,
    };
    return xign_public_key_from_parameters("EC", parameters);
}
/* A P-256 public key from its uncompressed point (65 bytes), checked to be on the curve. OpenSSL 3 imports
 * it several times faster than d2i_PUBKEY decodes the same key as DER (XignCrypto/P256.swift). */
static inline EVP_PKEY *xign_p256_public_key(const unsigned char *point, size_t length) {
    return xign_ec_public_key("prime256v1", point, length);
}
static inline EVP_PKEY *xign_ec_generate(const char *group) { return EVP_EC_gen(group); }
static const unsigned long xign_name_format_rfc2253 = XN_FLAG_RFC2253;

/* Whether the certificate's extended key usage lists `oid` (dotted): 1 or 0; -1 when it has no such extension. */
static inline int xign_x509_eku_lists(X509 *certificate, const char *oid) {
    EXTENDED_KEY_USAGE *usages = X509_get_ext_d2i(certificate, NID_ext_key_usage, NULL, NULL);
    if (usages == NULL) return -1;
    int found = 0;
    char text[80];
    for (int i = 0; i < sk_ASN1_OBJECT_num(usages); i++) {
        if (OBJ_obj2txt(text, sizeof text, sk_ASN1_OBJECT_value(usages, i), 1) > 0 && strcmp(text, oid) == 0) found = 1;
    }
    EXTENDED_KEY_USAGE_free(usages);
    return found;
}

/* The TPM manufacturer (TCG attribute 2.23.133.2.1, such as "id:49465800") in a directoryName of the certificate's
 * subject alternative name, copied into `out` (NUL-terminated): its length, or -1 when there is none. */
static inline int xign_x509_tpm_manufacturer(X509 *certificate, char *out, size_t capacity) {
    GENERAL_NAMES *names = X509_get_ext_d2i(certificate, NID_subject_alt_name, NULL, NULL);
    if (names == NULL) return -1;
    int length = -1;
    ASN1_OBJECT *manufacturer = OBJ_txt2obj("2.23.133.2.1", 1);
    for (int i = 0; manufacturer != NULL && length < 0 && i < sk_GENERAL_NAME_num(names); i++) {
        GENERAL_NAME *name = sk_GENERAL_NAME_value(names, i);
        if (name->type != GEN_DIRNAME) continue;
        int index = X509_NAME_get_index_by_OBJ(name->d.directoryName, manufacturer, -1);
        if (index < 0) continue;
        ASN1_STRING *value = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(name->d.directoryName, index));
        int size = ASN1_STRING_length(value);
        if (value == NULL || size <= 0 || (size_t)size >= capacity) continue;
        memcpy(out, ASN1_STRING_get0_data(value), (size_t)size);
        out[size] = 0;
        length = size;
    }
    ASN1_OBJECT_free(manufacturer);
    GENERAL_NAMES_free(names);
    return length;
}

/* The last certificate of a verified chain: the trusted one it ends at. */
static inline X509 *xign_x509_chain_anchor(X509_STORE_CTX *context) {
    STACK_OF(X509) *chain = X509_STORE_CTX_get0_chain(context);
    int count = chain == NULL ? 0 : sk_X509_num(chain);
    return count > 0 ? sk_X509_value(chain, count - 1) : NULL;
}

#endif
