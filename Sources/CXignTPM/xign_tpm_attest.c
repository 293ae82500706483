/* Key attestation: the maker's EK certificate, an attestation key (AK) the manager's credential proves to live beside
 * the EK, and TPM2_Certify of a device or host key by that AK (docs/design.md, "Proven hardware keys"). */
#include "xign_tpm.h"
#include "xign_tpm_private.h"

#include <string.h>

/* NV indices of the EK certificates and the templates of their keys (TCG EK Credential Profile 2.3, 2.2.1.4). */
static const TPMI_RH_NV_INDEX ek_certificate_index[] = { 0x01c00002, 0x01c0000a, 0x01c00016 };

/* PolicySecret(TPM_RH_ENDORSEMENT): policy A (SHA-256) of the low-range templates, policy B (SHA-384) of the high. */
static const uint8_t policy_a_sha256[32] = {
    0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc, 0x8d, 0x46, 0xa5, 0xd7, 0x24,
    0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52, 0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa,
};
static const uint8_t policy_b_sha384[48] = {
    0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc, 0xf5, 0xfd, 0x3a, 0x1a,
    0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4, 0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca,
    0xcb, 0x47, 0xba, 0x09, 0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12,
};

/* The EK the certificate of `kind` is for: templates L-1 (RSA 2048), L-2 (P-256) and H-3 (P-384). */
static TPM2B_PUBLIC ek_template(xign_tpm_ek_kind kind) {
    TPM2B_PUBLIC template = { 0 };
    TPMT_PUBLIC *area = &template.publicArea;
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                             TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT;
    if (kind == XIGN_TPM_EK_P384) {
        area->nameAlg = TPM2_ALG_SHA384;
        area->objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
        area->authPolicy.size = sizeof policy_b_sha384;
        memcpy(area->authPolicy.buffer, policy_b_sha384, sizeof policy_b_sha384);
    } else {
        area->nameAlg = TPM2_ALG_SHA256;
        area->authPolicy.size = sizeof policy_a_sha256;
        memcpy(area->authPolicy.buffer, policy_a_sha256, sizeof policy_a_sha256);
    }
    if (kind == XIGN_TPM_EK_RSA2048) {
        area->type = TPM2_ALG_RSA;
        area->parameters.rsaDetail.symmetric.algorithm = TPM2_ALG_AES;
        area->parameters.rsaDetail.symmetric.keyBits.aes = 128;
        area->parameters.rsaDetail.symmetric.mode.aes = TPM2_ALG_CFB;
        area->parameters.rsaDetail.scheme.scheme = TPM2_ALG_NULL;
        area->parameters.rsaDetail.keyBits = 2048;
        area->unique.rsa.size = 256;
    } else {
        area->type = TPM2_ALG_ECC;
        TPMS_ECC_PARMS *ecc = &area->parameters.eccDetail;
        ecc->symmetric.algorithm = TPM2_ALG_AES;
        ecc->symmetric.keyBits.aes = kind == XIGN_TPM_EK_P384 ? 256 : 128;
        ecc->symmetric.mode.aes = TPM2_ALG_CFB;
        ecc->scheme.scheme = TPM2_ALG_NULL;
        ecc->kdf.scheme = TPM2_ALG_NULL;
        ecc->curveID = kind == XIGN_TPM_EK_P384 ? TPM2_ECC_NIST_P384 : TPM2_ECC_NIST_P256;
        if (kind == XIGN_TPM_EK_P256) {
            area->unique.ecc.x.size = 32;
            area->unique.ecc.y.size = 32;
        }
    }
    return template;
}

uint32_t xign_tpm_read_ek_certificate(xign_tpm *tpm, xign_tpm_ek_kind kind, uint8_t *out, size_t capacity, size_t *size) {
    *size = 0;
    if ((unsigned)kind > XIGN_TPM_EK_P384) return XIGN_TPM_RC_BAD_BLOB;
    ESYS_TR index = ESYS_TR_NONE;
    if (xign_tss2.Esys_TR_FromTPMPublic(tpm->esys, ek_certificate_index[kind], ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &index) !=
        TSS2_RC_SUCCESS) {
        return XIGN_TPM_RC_NO_EK_CERTIFICATE;
    }
    TPM2B_NV_PUBLIC *public_area = NULL;
    TSS2_RC rc = xign_tss2.Esys_NV_ReadPublic(tpm->esys, index, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &public_area, NULL);
    size_t total = rc == TSS2_RC_SUCCESS ? public_area->nvPublic.dataSize : 0;
    xign_tss2.Esys_Free(public_area);
    if (rc == TSS2_RC_SUCCESS && (total == 0 || total > capacity)) rc = XIGN_TPM_RC_BAD_BLOB;
    /* In pieces no larger than any TPM's NV buffer. Makers let the index authorize its own reads (empty password);
     * where one allows only the owner's, that (empty) authorization is tried once. */
    ESYS_TR authorization = index;
    for (size_t offset = 0; rc == TSS2_RC_SUCCESS && offset < total;) {
        UINT16 piece = (UINT16)(total - offset < 512 ? total - offset : 512);
        TPM2B_MAX_NV_BUFFER *data = NULL;
        rc = xign_tss2.Esys_NV_Read(tpm->esys, authorization, index, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, piece, (UINT16)offset, &data);
        if (rc != TSS2_RC_SUCCESS && offset == 0 && authorization == index) {
            authorization = ESYS_TR_RH_OWNER;
            rc = TSS2_RC_SUCCESS;
            continue;
        }
        if (rc == TSS2_RC_SUCCESS) {
            if (data->size != piece) rc = XIGN_TPM_RC_BAD_BLOB;
            else memcpy(out + offset, data->buffer, piece);
            offset += piece;
        }
        xign_tss2.Esys_Free(data);
    }
    xign_tss2.Esys_TR_Close(tpm->esys, &index);
    if (rc == TSS2_RC_SUCCESS) *size = total;
    return rc;
}

/* A restricted P-256 signing key: it signs only what the TPM made (attestations), never a digest from outside that
 * starts like one. */
static TPM2B_PUBLIC ak_template(void) {
    TPM2B_PUBLIC template = tpm_signing_template(TPM2_ALG_ECC);
    template.publicArea.objectAttributes |= TPMA_OBJECT_RESTRICTED;
    TPMS_ECC_PARMS *ecc = &template.publicArea.parameters.eccDetail;
    ecc->symmetric.algorithm = TPM2_ALG_NULL;
    ecc->scheme.scheme = TPM2_ALG_ECDSA;
    ecc->scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    ecc->curveID = TPM2_ECC_NIST_P256;
    ecc->kdf.scheme = TPM2_ALG_NULL;
    return template;
}

uint32_t xign_tpm_create_ak(xign_tpm *tpm, xign_tpm_blob *blob) { return tpm_create(tpm, ak_template(), NULL, 0, blob, NULL); }

/* A policy session that satisfies PolicySecret(TPM_RH_ENDORSEMENT), for using a low-range EK. */
static uint32_t endorsement_policy_session(xign_tpm *tpm, ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = { .algorithm = TPM2_ALG_NULL };
    TSS2_RC rc = xign_tss2.Esys_StartAuthSession(tpm->esys, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, NULL,
                                                 TPM2_SE_POLICY, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_TIMEOUT *timeout = NULL;
    TPMT_TK_AUTH *ticket = NULL;
    rc = xign_tss2.Esys_PolicySecret(tpm->esys, ESYS_TR_RH_ENDORSEMENT, *session, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, NULL, NULL,
                                     NULL, 0, &timeout, &ticket);
    xign_tss2.Esys_Free(timeout);
    xign_tss2.Esys_Free(ticket);
    if (rc != TSS2_RC_SUCCESS) {
        xign_tss2.Esys_FlushContext(tpm->esys, *session);
        *session = ESYS_TR_NONE;
    }
    return rc;
}

uint32_t xign_tpm_activate_credential(xign_tpm *tpm, xign_tpm_ek_kind kind, const xign_tpm_blob *ak, const uint8_t *credential,
                                      size_t credential_size, const uint8_t *secret, size_t secret_size, uint8_t out[64], size_t *out_size) {
    *out_size = 0;
    if ((unsigned)kind > XIGN_TPM_EK_P384) return XIGN_TPM_RC_BAD_BLOB;
    TPM2B_ID_OBJECT credential_blob = { 0 };
    TPM2B_ENCRYPTED_SECRET encrypted_secret = { 0 };
    size_t offset = 0;
    if (xign_tss2.Tss2_MU_TPM2B_ID_OBJECT_Unmarshal(credential, credential_size, &offset, &credential_blob) != TSS2_RC_SUCCESS ||
        offset != credential_size) return XIGN_TPM_RC_BAD_CREDENTIAL;
    offset = 0;
    if (xign_tss2.Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal(secret, secret_size, &offset, &encrypted_secret) != TSS2_RC_SUCCESS ||
        offset != secret_size) return XIGN_TPM_RC_BAD_CREDENTIAL;
    ESYS_TR ak_handle = ESYS_TR_NONE, ek_handle = ESYS_TR_NONE, session = ESYS_TR_PASSWORD;
    TSS2_RC rc = tpm_load(tpm, ak, &ak_handle, TPM2_SE_HMAC, NULL);
    /* The EK, made again from its template: the endorsement seed makes it the same key every time. */
    if (rc == TSS2_RC_SUCCESS) rc = tpm_create_primary(tpm, ESYS_TR_RH_ENDORSEMENT, ek_template(kind), &ek_handle);
    if (rc == TSS2_RC_SUCCESS && kind != XIGN_TPM_EK_P384) rc = endorsement_policy_session(tpm, &session);
    TPM2B_DIGEST *released = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        rc = xign_tss2.Esys_ActivateCredential(tpm->esys, ak_handle, ek_handle, ESYS_TR_PASSWORD, session, ESYS_TR_NONE, &credential_blob,
                                               &encrypted_secret, &released);
    }
    if (rc == TSS2_RC_SUCCESS) {
        if (released->size > 64) rc = XIGN_TPM_RC_BAD_CREDENTIAL;
        else {
            memcpy(out, released->buffer, released->size);
            *out_size = released->size;
        }
        memset(released->buffer, 0, sizeof released->buffer);
    }
    xign_tss2.Esys_Free(released);
    if (session != ESYS_TR_PASSWORD && session != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, session);
    if (ek_handle != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, ek_handle);
    if (ak_handle != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, ak_handle);
    return rc;
}

uint32_t xign_tpm_certify(xign_tpm *tpm, const xign_tpm_blob *ak, const xign_tpm_blob *key, const uint8_t *qualifying,
                          size_t qualifying_size, uint8_t *attest, size_t capacity, size_t *attest_size, uint8_t signature[64]) {
    *attest_size = 0;
    TPM2B_DATA qualifying_data = { 0 };
    if (qualifying_size > sizeof qualifying_data.buffer) return XIGN_TPM_RC_BAD_BLOB;
    qualifying_data.size = (UINT16)qualifying_size;
    memcpy(qualifying_data.buffer, qualifying, qualifying_size);
    ESYS_TR ak_handle = ESYS_TR_NONE, key_handle = ESYS_TR_NONE;
    TSS2_RC rc = tpm_load(tpm, ak, &ak_handle, TPM2_SE_HMAC, NULL);
    if (rc == TSS2_RC_SUCCESS) rc = tpm_load(tpm, key, &key_handle, TPM2_SE_HMAC, NULL);
    TPM2B_ATTEST *certify_info = NULL;
    TPMT_SIGNATURE *out = NULL;
    if (rc == TSS2_RC_SUCCESS) {
        TPMT_SIG_SCHEME scheme = { .scheme = TPM2_ALG_ECDSA, .details.ecdsa.hashAlg = TPM2_ALG_SHA256 };
        rc = xign_tss2.Esys_Certify(tpm->esys, key_handle, ak_handle, ESYS_TR_PASSWORD, ESYS_TR_PASSWORD, ESYS_TR_NONE, &qualifying_data,
                                    &scheme, &certify_info, &out);
    }
    if (rc == TSS2_RC_SUCCESS) {
        const TPMS_SIGNATURE_ECC *ecc = &out->signature.ecdsa;
        if (certify_info->size > capacity || out->sigAlg != TPM2_ALG_ECDSA || ecc->signatureR.size > 32 || ecc->signatureS.size > 32) {
            rc = XIGN_TPM_RC_BAD_BLOB;
        } else {
            memcpy(attest, certify_info->attestationData, certify_info->size);
            *attest_size = certify_info->size;
            memset(signature, 0, 64);
            memcpy(signature + (32 - ecc->signatureR.size), ecc->signatureR.buffer, ecc->signatureR.size);
            memcpy(signature + 32 + (32 - ecc->signatureS.size), ecc->signatureS.buffer, ecc->signatureS.size);
        }
    }
    xign_tss2.Esys_Free(certify_info);
    xign_tss2.Esys_Free(out);
    if (key_handle != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, key_handle);
    if (ak_handle != ESYS_TR_NONE) xign_tss2.Esys_FlushContext(tpm->esys, ak_handle);
    return rc;
}
