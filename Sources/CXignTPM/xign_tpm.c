#include "xign_tpm.h"
#include "xign_tpm_private.h"

#include <stdlib.h>
#include <string.h>

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/random.h>

struct xign_tss2 xign_tss2;

static pthread_once_t tss2_once = PTHREAD_ONCE_INIT;
static int tss2_loaded;

static void tss2_load(void) {
    void *esys = dlopen("libtss2-esys.so.0", RTLD_NOW | RTLD_LOCAL);
    void *tctildr = dlopen("libtss2-tctildr.so.0", RTLD_NOW | RTLD_LOCAL);
    void *rc = dlopen("libtss2-rc.so.0", RTLD_NOW | RTLD_LOCAL);
    void *mu = dlopen("libtss2-mu.so.0", RTLD_NOW | RTLD_LOCAL);
    int complete = esys != NULL && tctildr != NULL && rc != NULL && mu != NULL;
#define TSS2_RESOLVE(library, name) \
    if (complete && (xign_tss2.name = (__typeof__(name) *)dlsym(library, #name)) == NULL) complete = 0;
    TSS2_FUNCTIONS(TSS2_RESOLVE)
#undef TSS2_RESOLVE
    tss2_loaded = complete;
}

int xign_tss2_available(void) {
    pthread_once(&tss2_once, tss2_load);
    return tss2_loaded;
}

#define SRK_PERSISTENT_HANDLE 0x81000001u

uint32_t xign_tpm_open(const char *tcti, xign_tpm **out) {
    *out = NULL;
    if (tcti == NULL || *tcti == '\0') return TSS2_TCTI_RC_BAD_VALUE;
    if (!xign_tss2_available()) return XIGN_TPM_RC_NO_LIBRARY;
    xign_tpm *tpm = calloc(1, sizeof *tpm);
    if (tpm == NULL) return XIGN_TPM_RC_MEMORY;
    TSS2_RC rc = xign_tss2.Tss2_TctiLdr_Initialize(tcti, &tpm->tcti);
    if (rc == TSS2_RC_SUCCESS) rc = xign_tss2.Esys_Initialize(&tpm->esys, tpm->tcti, NULL);
    if (rc != TSS2_RC_SUCCESS) {
        xign_tpm_close(tpm);
        return rc;
    }
    *out = tpm;
    return TSS2_RC_SUCCESS;
}

void xign_tpm_close(xign_tpm *tpm) {
    if (tpm == NULL) return;
    if (tpm->esys != NULL) xign_tss2.Esys_Finalize(&tpm->esys);
    if (tpm->tcti != NULL) xign_tss2.Tss2_TctiLdr_Finalize(&tpm->tcti);
    free(tpm);
}

/* The TCG ECC SRK template (TCG TPM v2.0 Provisioning Guidance): a restricted P-256 decryption key. */
static TPM2B_PUBLIC srk_template(void) {
    TPM2B_PUBLIC template = { 0 };
    TPMT_PUBLIC *area = &template.publicArea;
    area->type = TPM2_ALG_ECC;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                             TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_NODA | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    area->parameters.eccDetail.symmetric.keyBits.aes = 128;
    area->parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    area->parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    area->unique.ecc.x.size = 32;
    area->unique.ecc.y.size = 32;
    return template;
}

/* A key that never leaves this TPM and signs without a password: fixedTPM|fixedParent|sensitiveDataOrigin|
 * userWithAuth|sign|noDA. noDA: lockouts are xign's (per activation), and a busy login server must not trip the TPM's. */
TPM2B_PUBLIC tpm_signing_template(TPMI_ALG_PUBLIC type) {
    TPM2B_PUBLIC template = { 0 };
    TPMT_PUBLIC *area = &template.publicArea;
    area->type = type;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                             TPMA_OBJECT_USERWITHAUTH | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_NODA;
    return template;
}

/* The device key: P-256, ECDSA-SHA256. */
static TPM2B_PUBLIC key_template(void) {
    TPM2B_PUBLIC template = tpm_signing_template(TPM2_ALG_ECC);
    TPMS_ECC_PARMS *ecc = &template.publicArea.parameters.eccDetail;
    ecc->symmetric.algorithm = TPM2_ALG_NULL;
    ecc->scheme.scheme = TPM2_ALG_ECDSA;
    ecc->scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    ecc->curveID = TPM2_ECC_NIST_P256;
    ecc->kdf.scheme = TPM2_ALG_NULL;
    return template;
}

/* The manager's PIN pepper: an HMAC-SHA256 key the TPM generates and never releases. */
static TPM2B_PUBLIC hmac_key_template(void) {
    TPM2B_PUBLIC template = tpm_signing_template(TPM2_ALG_KEYEDHASH);
    TPMT_KEYEDHASH_SCHEME *scheme = &template.publicArea.parameters.keyedHashDetail.scheme;
    scheme->scheme = TPM2_ALG_HMAC;
    scheme->details.hmac.hashAlg = TPM2_ALG_SHA256;
    return template;
}

uint32_t tpm_name_of(xign_tpm *tpm, ESYS_TR handle, uint8_t name[68], size_t *name_size) {
    TPM2B_NAME *value = NULL;
    TSS2_RC rc = xign_tss2.Esys_TR_GetName(tpm->esys, handle, &value);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (value->size > 68) {
        xign_tss2.Esys_Free(value);
        return XIGN_TPM_RC_MEMORY;
    }
    memcpy(name, value->name, value->size);
    *name_size = value->size;
    xign_tss2.Esys_Free(value);
    return TSS2_RC_SUCCESS;
}

uint32_t tpm_create_primary(xign_tpm *tpm, ESYS_TR hierarchy, TPM2B_PUBLIC template, ESYS_TR *handle) {
    TPM2B_SENSITIVE_CREATE sensitive = { 0 };
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION pcrs = { 0 };
    TPM2B_PUBLIC *out_public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    TSS2_RC rc = xign_tss2.Esys_CreatePrimary(tpm->esys, hierarchy, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outside,
                                              &pcrs, handle, &out_public, &creation_data, &creation_hash, &ticket);
    xign_tss2.Esys_Free(out_public);
    xign_tss2.Esys_Free(creation_data);
    xign_tss2.Esys_Free(creation_hash);
    xign_tss2.Esys_Free(ticket);
    return rc;
}

/* Whether `handle` holds a persistent object. Asked first, because libtss2 writes an error to stderr for a handle that
 * holds none, and the module's host (login on a terminal, GDM's worker) keeps its stderr. */
static int persistent_handle_exists(xign_tpm *tpm, TPM2_HANDLE handle) {
    TPMI_YES_NO more = 0;
    TPMS_CAPABILITY_DATA *data = NULL;
    if (xign_tss2.Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_HANDLES, handle, 1, &more,
                                     &data) != TSS2_RC_SUCCESS)
        return 0;
    int exists = data->data.handles.count > 0 && data->data.handles.handle[0] == handle;
    xign_tss2.Esys_Free(data);
    return exists;
}

/* The SRK: the persistent one if its name is `expected`, else created from the template.
 * *transient says whether the caller must flush it. With `expected`, a different SRK is an error. */
static uint32_t srk(xign_tpm *tpm, const uint8_t *expected, size_t expected_size, ESYS_TR *handle, int *transient) {
    uint8_t name[68];
    size_t name_size = 0;
    ESYS_TR persistent = ESYS_TR_NONE;
    *transient = 0;
    if (expected != NULL && persistent_handle_exists(tpm, SRK_PERSISTENT_HANDLE) &&
        xign_tss2.Esys_TR_FromTPMPublic(tpm->esys, SRK_PERSISTENT_HANDLE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &persistent) == TSS2_RC_SUCCESS) {
        if (tpm_name_of(tpm, persistent, name, &name_size) == TSS2_RC_SUCCESS && name_size == expected_size &&
            memcmp(name, expected, name_size) == 0) {
            *handle = persistent;
            return TSS2_RC_SUCCESS;
        }
        xign_tss2.Esys_TR_Close(tpm->esys, &persistent);
    }
    TSS2_RC rc = tpm_create_primary(tpm, ESYS_TR_RH_OWNER, srk_template(), handle);
    if (rc != TSS2_RC_SUCCESS) return rc;
    *transient = 1;
    if (expected != NULL) {
        rc = tpm_name_of(tpm, *handle, name, &name_size);
        if (rc == TSS2_RC_SUCCESS && (name_size != expected_size || memcmp(name, expected, name_size) != 0)) rc = XIGN_TPM_RC_SRK_MISMATCH;
        if (rc != TSS2_RC_SUCCESS) {
            xign_tss2.Esys_FlushContext(tpm->esys, *handle);
            *transient = 0;
        }
    }
    return rc;
}

uint32_t xign_tpm_srk_name(xign_tpm *tpm, uint8_t name[68], size_t *name_size) {
    ESYS_TR handle = ESYS_TR_NONE;
    int transient = 0;
    TSS2_RC rc = srk(tpm, NULL, 0, &handle, &transient);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = tpm_name_of(tpm, handle, name, name_size);
    if (transient) xign_tss2.Esys_FlushContext(tpm->esys, handle);
    return rc;
}

static uint32_t point_of(const TPM2B_PUBLIC *public_key, uint8_t point[65]) {
    const TPMS_ECC_POINT *ecc = &public_key->publicArea.unique.ecc;
    if (public_key->publicArea.type != TPM2_ALG_ECC || ecc->x.size > 32 || ecc->y.size > 32) return XIGN_TPM_RC_BAD_BLOB;
    memset(point, 0, 65);
    point[0] = 0x04;
    memcpy(point + 1 + (32 - ecc->x.size), ecc->x.buffer, ecc->x.size);
    memcpy(point + 33 + (32 - ecc->y.size), ecc->y.buffer, ecc->y.size);
    return TSS2_RC_SUCCESS;
}

/* The public and private parts of a new object as the blob stores them. */
static uint32_t marshal(const TPM2B_PUBLIC *public_key, const TPM2B_PRIVATE *private_key, xign_tpm_blob *blob) {
    size_t offset = 0;
    TSS2_RC rc = xign_tss2.Tss2_MU_TPM2B_PUBLIC_Marshal(public_key, blob->public_area, sizeof blob->public_area, &offset);
    blob->public_size = offset;
    offset = 0;
    if (rc == TSS2_RC_SUCCESS) rc = xign_tss2.Tss2_MU_TPM2B_PRIVATE_Marshal(private_key, blob->private_area, sizeof blob->private_area, &offset);
    blob->private_size = offset;
    return rc;
}

/* The offline PIN verifier: an HMAC key like the pepper, but not noDA, so wrong values count toward the TPM's lockout,
 * and usable only through its policy (`verifier_policy`) in both roles: no userWithAuth, and adminWithPolicy, so that
 * TPM2_ObjectChangeAuth (the ADMIN role), which a password session would authorize without the policy, needs a policy
 * with TPM2_PolicyCommandCode, which this one has not: nobody can run it, so every try goes through the policy. */
static const TPMA_OBJECT verifier_attributes = TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_FIXEDTPM;

static TPM2B_PUBLIC verifier_template(const TPM2B_DIGEST *policy) {
    TPM2B_PUBLIC template = hmac_key_template();
    template.publicArea.objectAttributes &= ~(TPMA_OBJECT_NODA | TPMA_OBJECT_USERWITHAUTH);
    template.publicArea.objectAttributes |= TPMA_OBJECT_ADMINWITHPOLICY;
    template.publicArea.authPolicy = *policy;
    return template;
}

/* The verifier's policy in `session`: the TPM's Clock is below `deadline` (TPMS_TIME_INFO.clockInfo.clock, at offset 8,
 * compared unsigned) and safe (clockInfo.safe, at offset 24, YES), then the authorization value. The TPM's Clock never
 * goes back while it is safe; after a reset without TPM2_Shutdown (a power cut) it starts again from the value it last
 * saved, below what it may have shown, and is not safe until it has passed that (docs/security.md, "Offline login"). */
static uint32_t verifier_policy(xign_tpm *tpm, ESYS_TR session, uint64_t deadline) {
    TPM2B_OPERAND operand = { .size = 8 };
    for (int i = 0; i < 8; i++) operand.buffer[i] = (uint8_t)(deadline >> (56 - 8 * i));
    TSS2_RC rc = xign_tss2.Esys_PolicyCounterTimer(tpm->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &operand, 8, TPM2_EO_UNSIGNED_LT);
    TPM2B_OPERAND safe = { .size = 1, .buffer = { TPM2_YES } };
    if (rc == TSS2_RC_SUCCESS) rc = xign_tss2.Esys_PolicyCounterTimer(tpm->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &safe, 24, TPM2_EO_EQ);
    if (rc == TSS2_RC_SUCCESS) rc = xign_tss2.Esys_PolicyAuthValue(tpm->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE);
    return rc;
}

/* A session of `type` salted to `key` (an SRK), with AES-CFB parameter encryption available. */
static uint32_t salted_session(xign_tpm *tpm, ESYS_TR key, TPM2_SE type, TPMA_SESSION attributes, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = { .algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB };
    TSS2_RC rc = xign_tss2.Esys_StartAuthSession(tpm->esys, key, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL, type,
                                       &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = xign_tss2.Esys_TRSess_SetAttributes(tpm->esys, *session, attributes | TPMA_SESSION_CONTINUESESSION, 0xff);
    if (rc != TSS2_RC_SUCCESS) {
        xign_tss2.Esys_FlushContext(tpm->esys, *session);
        *session = ESYS_TR_NONE;
    }
    return rc;
}

uint32_t tpm_salted_session(xign_tpm *tpm, ESYS_TR key, TPMA_SESSION attributes, ESYS_TR *session) {
    return salted_session(tpm, key, TPM2_SE_HMAC, attributes, session);
}

/* A new object under the SRK. With `auth` (the verifier's), the object needs that authorization value, which goes to
 * the TPM encrypted: TPM2_Create's first parameter, in a session salted to the SRK. */
uint32_t tpm_create(xign_tpm *tpm, TPM2B_PUBLIC template, const uint8_t *auth, size_t auth_size, xign_tpm_blob *blob,
                       TPM2B_PUBLIC **out_public) {
    memset(blob, 0, sizeof *blob);
    if (out_public != NULL) *out_public = NULL;
    TPM2B_PUBLIC *created_public = NULL;
    ESYS_TR parent = ESYS_TR_NONE, session = ESYS_TR_NONE;
    int transient = 0;
    TSS2_RC rc = srk(tpm, NULL, 0, &parent, &transient);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = tpm_name_of(tpm, parent, blob->srk_name, &blob->srk_name_size);
    TPM2B_SENSITIVE_CREATE sensitive = { 0 };
    if (auth_size > 0) {
        if (rc == TSS2_RC_SUCCESS) rc = tpm_salted_session(tpm, parent, TPMA_SESSION_DECRYPT, &session);
        sensitive.sensitive.userAuth.size = (UINT16)auth_size;
        memcpy(sensitive.sensitive.userAuth.buffer, auth, auth_size);
    }
    TPM2B_DATA outside = { 0 };
    TPML_PCR_SELECTION pcrs = { 0 };
    TPM2B_PRIVATE *out_private = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        rc = xign_tss2.Esys_Create(tpm->esys, parent, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, &sensitive, &template, &outside, &pcrs, &out_private,
                         &created_public, &creation_data, &creation_hash, &ticket);
    }
    memset(&sensitive, 0, sizeof sensitive);
    if (rc == TSS2_RC_SUCCESS) rc = marshal(created_public, out_private, blob);
    if (out_public != NULL) *out_public = created_public;
    else xign_tss2.Esys_Free(created_public);
    xign_tss2.Esys_Free(out_private);
    xign_tss2.Esys_Free(creation_data);
    xign_tss2.Esys_Free(creation_hash);
    xign_tss2.Esys_Free(ticket);
    if (session != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, session);
    if (transient) xign_tss2.Esys_FlushContext(tpm->esys, parent);
    return rc;
}

uint32_t xign_tpm_create_key(xign_tpm *tpm, xign_tpm_blob *blob, uint8_t point[65]) {
    TPM2B_PUBLIC *out_public = NULL;
    TSS2_RC rc = tpm_create(tpm, key_template(), NULL, 0, blob, &out_public);
    if (rc == TSS2_RC_SUCCESS) rc = point_of(out_public, point);
    xign_tss2.Esys_Free(out_public);
    return rc;
}

uint32_t xign_tpm_create_hmac_key(xign_tpm *tpm, xign_tpm_blob *blob) {
    return tpm_create(tpm, hmac_key_template(), NULL, 0, blob, NULL);
}

uint32_t tpm_unmarshal(const xign_tpm_blob *blob, TPM2B_PUBLIC *public_key, TPM2B_PRIVATE *private_key) {
    size_t offset = 0;
    if (!xign_tss2_available()) return XIGN_TPM_RC_NO_LIBRARY;
    if (blob->public_size > sizeof blob->public_area || blob->private_size > sizeof blob->private_area) return XIGN_TPM_RC_BAD_BLOB;
    if (xign_tss2.Tss2_MU_TPM2B_PUBLIC_Unmarshal(blob->public_area, blob->public_size, &offset, public_key) != TSS2_RC_SUCCESS ||
        offset != blob->public_size) return XIGN_TPM_RC_BAD_BLOB;
    offset = 0;
    if (private_key != NULL &&
        (xign_tss2.Tss2_MU_TPM2B_PRIVATE_Unmarshal(blob->private_area, blob->private_size, &offset, private_key) != TSS2_RC_SUCCESS ||
         offset != blob->private_size)) return XIGN_TPM_RC_BAD_BLOB;
    return TSS2_RC_SUCCESS;
}

uint32_t xign_tpm_blob_point(const xign_tpm_blob *blob, uint8_t point[65]) {
    TPM2B_PUBLIC public_key = { 0 };
    TSS2_RC rc = tpm_unmarshal(blob, &public_key, NULL);
    return rc == TSS2_RC_SUCCESS ? point_of(&public_key, point) : rc;
}

/* Loads a stored key under its SRK. With `session`, also starts a session salted to that SRK for using the key. */
uint32_t tpm_load(xign_tpm *tpm, const xign_tpm_blob *blob, ESYS_TR *handle, TPM2_SE session_type, ESYS_TR *session) {
    TPM2B_PUBLIC public_key = { 0 };
    TPM2B_PRIVATE private_key = { 0 };
    *handle = ESYS_TR_NONE;
    TSS2_RC rc = tpm_unmarshal(blob, &public_key, &private_key);
    if (rc != TSS2_RC_SUCCESS) return rc;
    ESYS_TR parent = ESYS_TR_NONE;
    int transient = 0;
    rc = srk(tpm, blob->srk_name, blob->srk_name_size, &parent, &transient);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = xign_tss2.Esys_Load(tpm->esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &private_key, &public_key, handle);
    if (rc == TSS2_RC_SUCCESS && session != NULL) rc = salted_session(tpm, parent, session_type, 0, session);
    if (transient) xign_tss2.Esys_FlushContext(tpm->esys, parent);
    return rc;
}

uint32_t xign_tpm_load(xign_tpm *tpm, const xign_tpm_blob *blob, uint32_t *handle) {
    ESYS_TR key = ESYS_TR_NONE;
    TSS2_RC rc = tpm_load(tpm, blob, &key, TPM2_SE_HMAC, NULL);
    *handle = key;
    return rc;
}

uint32_t xign_tpm_hmac(xign_tpm *tpm, uint32_t handle, const uint8_t *data, size_t size, uint8_t mac[32]) {
    TPM2B_MAX_BUFFER buffer = { 0 };
    if (size > sizeof buffer.buffer) return XIGN_TPM_RC_BAD_BLOB;
    buffer.size = (UINT16)size;
    memcpy(buffer.buffer, data, size);
    TPM2B_DIGEST *out = NULL;
    TSS2_RC rc = xign_tss2.Esys_HMAC(tpm->esys, handle, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &buffer, TPM2_ALG_SHA256, &out);
    if (rc == TSS2_RC_SUCCESS) {
        if (out->size == 32) memcpy(mac, out->buffer, 32);
        else rc = XIGN_TPM_RC_BAD_BLOB;
    }
    xign_tss2.Esys_Free(out);
    return rc;
}

uint32_t xign_tpm_sign(xign_tpm *tpm, const xign_tpm_blob *blob, const uint8_t digest[32], uint8_t signature[64]) {
    ESYS_TR key = ESYS_TR_NONE;
    TSS2_RC rc = xign_tpm_load(tpm, blob, &key);
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_DIGEST to_sign = { .size = 32 };
        memcpy(to_sign.buffer, digest, 32);
        TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_ECDSA, .details.ecdsa.hashAlg = TPM2_ALG_SHA256 };
        TPMT_TK_HASHCHECK validation = { .tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL };
        TPMT_SIGNATURE *out = NULL;
        rc = xign_tss2.Esys_Sign(tpm->esys, key, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &to_sign, &scheme, &validation, &out);
        if (rc == TSS2_RC_SUCCESS) {
            const TPMS_SIGNATURE_ECC *ecc = &out->signature.ecdsa;
            if (ecc->signatureR.size > 32 || ecc->signatureS.size > 32) {
                rc = XIGN_TPM_RC_BAD_BLOB;
            } else {
                memset(signature, 0, 64);
                memcpy(signature + (32 - ecc->signatureR.size), ecc->signatureR.buffer, ecc->signatureR.size);
                memcpy(signature + 32 + (32 - ecc->signatureS.size), ecc->signatureS.buffer, ecc->signatureS.size);
            }
        }
        xign_tss2.Esys_Free(out);
        xign_tss2.Esys_FlushContext(tpm->esys, key);
    }
    return rc;
}

uint32_t xign_tpm_create_verifier(xign_tpm *tpm, const uint8_t *auth, size_t auth_size, uint64_t deadline, xign_tpm_blob *blob) {
    memset(blob, 0, sizeof *blob);
    if (auth == NULL || auth_size == 0 || auth_size > 32) return XIGN_TPM_RC_BAD_BLOB;
    ESYS_TR trial = ESYS_TR_NONE;
    TPMT_SYM_DEF none = { .algorithm = TPM2_ALG_NULL };
    TSS2_RC rc = xign_tss2.Esys_StartAuthSession(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                                 TPM2_SE_TRIAL, &none, TPM2_ALG_SHA256, &trial);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_DIGEST *policy = NULL;
    rc = verifier_policy(tpm, trial, deadline);
    if (rc == TSS2_RC_SUCCESS) rc = xign_tss2.Esys_PolicyGetDigest(tpm->esys, trial, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &policy);
    xign_tss2.Esys_FlushContext(tpm->esys, trial);
    if (rc == TSS2_RC_SUCCESS) rc = tpm_create(tpm, verifier_template(policy), auth, auth_size, blob, NULL);
    xign_tss2.Esys_Free(policy);
    return rc;
}

/* TPM_RC_AUTH_FAIL (format 1, any session number), from the TPM or passed on by a resource manager. */
static int is_auth_failure(TSS2_RC rc) {
    uint32_t layer = rc >> 16;
    return (layer == 0 || layer == 12) && (rc & 0x080) != 0 && (rc & 0x0BF) == 0x08E;
}

/* TPM_RC_POLICY (format 0): PolicyCounterTimer's comparison failed, so the grace is over on the TPM's Clock. */
static int is_policy_failure(TSS2_RC rc) {
    uint32_t layer = rc >> 16;
    return (layer == 0 || layer == 12) && (rc & 0xFFFF) == TPM2_RC_POLICY;
}

uint32_t xign_tpm_check_verifier(xign_tpm *tpm, const xign_tpm_blob *blob, const uint8_t *auth, size_t auth_size, uint64_t deadline) {
    if (auth_size == 0 || auth_size > 32) return XIGN_TPM_RC_BAD_BLOB;
    TPM2B_PUBLIC public_key = { 0 };
    TSS2_RC rc = tpm_unmarshal(blob, &public_key, NULL);
    if (rc != TSS2_RC_SUCCESS) return rc;
    /* Only a verifier: a key usable without its policy would accept any PIN, or outlive the grace. One made before
     * adminWithPolicy (whose authorization root could change in a password session) is not used: the next online
     * login makes a new one. */
    TPMA_OBJECT attributes = public_key.publicArea.objectAttributes;
    if (public_key.publicArea.type != TPM2_ALG_KEYEDHASH || (attributes & TPMA_OBJECT_NODA) || (attributes & TPMA_OBJECT_USERWITHAUTH) ||
        public_key.publicArea.authPolicy.size != 32) return XIGN_TPM_RC_BAD_BLOB;
    if ((attributes & verifier_attributes) != verifier_attributes) return XIGN_TPM_RC_OLD_VERIFIER;
    /* The policy refuses an unsafe Clock too; asking first says which of its conditions failed. */
    uint64_t clock = 0;
    int safe = 0;
    rc = xign_tpm_read_clock(tpm, &clock, &safe);
    if (rc != TSS2_RC_SUCCESS) return rc;
    if (!safe) return XIGN_TPM_RC_CLOCK_UNSAFE;
    ESYS_TR key = ESYS_TR_NONE, session = ESYS_TR_NONE;
    rc = tpm_load(tpm, blob, &key, TPM2_SE_POLICY, &session);
    if (rc == TSS2_RC_SUCCESS) {
        rc = verifier_policy(tpm, session, deadline);
        if (is_policy_failure(rc)) rc = XIGN_TPM_RC_GRACE_OVER;
    }
    TPM2B_AUTH value = { .size = (UINT16)auth_size };
    memcpy(value.buffer, auth, auth_size);
    if (rc == TSS2_RC_SUCCESS) rc = xign_tss2.Esys_TR_SetAuth(tpm->esys, key, &value);
    memset(&value, 0, sizeof value);
    if (rc == TSS2_RC_SUCCESS) {
        TPM2B_MAX_BUFFER data = { .size = 1, .buffer = { 0x58 } };
        TPM2B_DIGEST *out = NULL;
        rc = xign_tss2.Esys_HMAC(tpm->esys, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &data, TPM2_ALG_SHA256, &out);
        xign_tss2.Esys_Free(out);
        if (is_auth_failure(rc)) rc = XIGN_TPM_RC_WRONG_AUTH;
    }
    if (session != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, session);
    if (key != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, key);
    return rc;
}

uint32_t xign_tpm_read_clock(xign_tpm *tpm, uint64_t *clock, int *safe) {
    TPMS_TIME_INFO *time = NULL;
    TSS2_RC rc = xign_tss2.Esys_ReadClock(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &time);
    *clock = rc == TSS2_RC_SUCCESS ? time->clockInfo.clock : 0;
    *safe = rc == TSS2_RC_SUCCESS && time->clockInfo.safe == TPM2_YES;
    xign_tss2.Esys_Free(time);
    return rc;
}

uint32_t xign_tpm_take_lockout(xign_tpm *tpm) {
    TPM2B_AUTH value = { .size = 32 };
    if (getrandom(value.buffer, 32, 0) != 32) return XIGN_TPM_RC_MEMORY;
    TSS2_RC rc = xign_tss2.Esys_HierarchyChangeAuth(tpm->esys, ESYS_TR_RH_LOCKOUT, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &value);
    memset(&value, 0, sizeof value);
    /* ESYS keeps the new value for the handle; forget it there too. */
    TPM2B_AUTH empty = { 0 };
    xign_tss2.Esys_TR_SetAuth(tpm->esys, ESYS_TR_RH_LOCKOUT, &empty);
    return rc;
}

uint32_t xign_tpm_read_lockout(xign_tpm *tpm, xign_tpm_lockout *out) {
    memset(out, 0, sizeof *out);
    TPMI_YES_NO more = 0;
    TPMS_CAPABILITY_DATA *data = NULL;
    TSS2_RC rc = xign_tss2.Esys_GetCapability(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, TPM2_CAP_TPM_PROPERTIES, TPM2_PT_PERMANENT,
                                    TPM2_PT_LOCKOUT_RECOVERY - TPM2_PT_PERMANENT + 1, &more, &data);
    if (rc != TSS2_RC_SUCCESS) return rc;
    const TPML_TAGGED_TPM_PROPERTY *properties = &data->data.tpmProperties;
    for (UINT32 i = 0; i < properties->count && i < TPM2_MAX_TPM_PROPERTIES; i++) {
        UINT32 value = properties->tpmProperty[i].value;
        switch (properties->tpmProperty[i].property) {
        case TPM2_PT_PERMANENT:
            out->in_lockout = (value & TPMA_PERMANENT_INLOCKOUT) != 0;
            out->lockout_auth_set = (value & TPMA_PERMANENT_LOCKOUTAUTHSET) != 0;
            break;
        case TPM2_PT_LOCKOUT_COUNTER: out->counter = value; break;
        case TPM2_PT_MAX_AUTH_FAIL: out->max_tries = value; break;
        case TPM2_PT_LOCKOUT_INTERVAL: out->recovery_seconds = value; break;
        case TPM2_PT_LOCKOUT_RECOVERY: out->lockout_recovery_seconds = value; break;
        default: break;
        }
    }
    xign_tss2.Esys_Free(data);
    return TSS2_RC_SUCCESS;
}

const char *xign_tpm_describe(uint32_t rc) {
    switch (rc) {
    case XIGN_TPM_RC_WRONG_AUTH: return "the TPM refused the authorization value and counted the failure";
    case XIGN_TPM_RC_GRACE_OVER: return "the TPM's clock is past the offline grace";
    case XIGN_TPM_RC_CLOCK_UNSAFE: return "the TPM's clock is not safe after a reset without shutdown";
    case XIGN_TPM_RC_OLD_VERIFIER: return "the offline verifier was made before the TPM bound every use to its policy";
    case XIGN_TPM_RC_SRK_MISMATCH: return "the storage root key differs from the one the device key was created under";
    case XIGN_TPM_RC_BAD_BLOB: return "the stored key blob is damaged";
    case XIGN_TPM_RC_MEMORY: return "out of memory";
    case XIGN_TPM_RC_NO_EK_CERTIFICATE: return "the TPM holds no endorsement-key certificate from its maker";
    case XIGN_TPM_RC_BAD_CREDENTIAL: return "the manager's attestation challenge is malformed";
    case XIGN_TPM_RC_NO_LIBRARY:
        return "libtss2 is not installed (Debian: apt install libtss2-esys-3.0.2-0 libtss2-tctildr0 libtss2-rc0 libtss2-mu0)";
    default:
        if (xign_tss2_available()) return xign_tss2.Tss2_RC_Decode(rc);
        static __thread char unknown[32];
        snprintf(unknown, sizeof unknown, "TPM error 0x%08x", rc);
        return unknown;
    }
}
