/* What the TPM files of this target share: the libtss2 functions opened at run time, the context, and the helpers
 * that create and load objects under the SRK. Not part of the module's interface. */
#ifndef XIGN_TPM_PRIVATE_H
#define XIGN_TPM_PRIVATE_H

#include "xign_tpm.h"

#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>

/* libtss2 is opened at the first xign_tpm_open, not when the module that links this is loaded: a login with a
 * software key, or on a server that only confirms, never pays for it (docs/design.md, "The PAM host"). */
#define TSS2_FUNCTIONS(X) \
    X(esys, Esys_ActivateCredential) \
    X(esys, Esys_Certify) \
    X(esys, Esys_Create) \
    X(esys, Esys_CreatePrimary) \
    X(esys, Esys_Finalize) \
    X(esys, Esys_FlushContext) \
    X(esys, Esys_Free) \
    X(esys, Esys_GetCapability) \
    X(esys, Esys_HMAC) \
    X(esys, Esys_HierarchyChangeAuth) \
    X(esys, Esys_Initialize) \
    X(esys, Esys_Load) \
    X(esys, Esys_NV_Read) \
    X(esys, Esys_NV_ReadPublic) \
    X(esys, Esys_PolicyAuthValue) \
    X(esys, Esys_PolicyCounterTimer) \
    X(esys, Esys_PolicyGetDigest) \
    X(esys, Esys_PolicySecret) \
    X(esys, Esys_ReadClock) \
    X(esys, Esys_Sign) \
    X(esys, Esys_StartAuthSession) \
    X(esys, Esys_TRSess_SetAttributes) \
    X(esys, Esys_TR_Close) \
    X(esys, Esys_TR_FromTPMPublic) \
    X(esys, Esys_TR_GetName) \
    X(esys, Esys_TR_SetAuth) \
    X(tctildr, Tss2_TctiLdr_Finalize) \
    X(tctildr, Tss2_TctiLdr_Initialize) \
    X(rc, Tss2_RC_Decode) \
    X(mu, Tss2_MU_TPM2B_PUBLIC_Marshal) \
    X(mu, Tss2_MU_TPM2B_PRIVATE_Marshal) \
    X(mu, Tss2_MU_TPM2B_PUBLIC_Unmarshal) \
    X(mu, Tss2_MU_TPM2B_PRIVATE_Unmarshal) \
    X(mu, Tss2_MU_TPM2B_ID_OBJECT_Unmarshal) \
    X(mu, Tss2_MU_TPM2B_ENCRYPTED_SECRET_Unmarshal)

struct xign_tss2 {
#define TSS2_POINTER(library, name) __typeof__(name) *name;
    TSS2_FUNCTIONS(TSS2_POINTER)
#undef TSS2_POINTER
};
extern struct xign_tss2 xign_tss2;

/* Whether libtss2 is there, opening it the first time. */
int xign_tss2_available(void);

struct xign_tpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
};

/* The name of a loaded object. */
uint32_t tpm_name_of(xign_tpm *tpm, ESYS_TR handle, uint8_t name[68], size_t *name_size);
/* fixedTPM|fixedParent|sensitiveDataOrigin|userWithAuth|sign|noDA, for `type`. */
TPM2B_PUBLIC tpm_signing_template(TPMI_ALG_PUBLIC type);
/* A primary key of `hierarchy` from `template` (empty authorization); the caller flushes *handle. */
uint32_t tpm_create_primary(xign_tpm *tpm, ESYS_TR hierarchy, TPM2B_PUBLIC template, ESYS_TR *handle);
/* A new object under the SRK; *out_public, unless out_public is NULL, is the caller's to free. */
uint32_t tpm_create(xign_tpm *tpm, TPM2B_PUBLIC template, const uint8_t *auth, size_t auth_size, xign_tpm_blob *blob, TPM2B_PUBLIC **out_public);
/* Loads a stored object under its SRK; with `session`, also starts a session of `session_type` (TPM2_SE_HMAC or
 * TPM2_SE_POLICY) salted to that SRK. */
uint32_t tpm_load(xign_tpm *tpm, const xign_tpm_blob *blob, ESYS_TR *handle, TPM2_SE session_type, ESYS_TR *session);
/* The blob's public part (and private part, unless NULL). */
uint32_t tpm_unmarshal(const xign_tpm_blob *blob, TPM2B_PUBLIC *public_key, TPM2B_PRIVATE *private_key);

#endif
