/* TPM2 keys over libtss2-esys: device keys (create, sign), the manager's HMAC pepper, and the SRK that wraps them. */
#ifndef XIGN_TPM_H
#define XIGN_TPM_H

#include <stddef.h>
#include <stdint.h>

typedef struct xign_tpm xign_tpm;

/* Return codes are TSS2_RC values (0 is success) or one of these. */
#define XIGN_TPM_RC_SRK_MISMATCH 0x58490001u /* the SRK is not the one the key was created under (TPM cleared, or another TPM) */
#define XIGN_TPM_RC_BAD_BLOB     0x58490002u /* the stored blob does not unmarshal */
#define XIGN_TPM_RC_MEMORY       0x58490003u
#define XIGN_TPM_RC_WRONG_AUTH   0x58490004u /* the TPM refused the authorization value of a dictionary-attack protected object */
#define XIGN_TPM_RC_NO_LIBRARY   0x58490005u /* libtss2 could not be opened */
#define XIGN_TPM_RC_NO_EK_CERTIFICATE 0x58490006u /* the TPM holds no EK certificate of that kind */
#define XIGN_TPM_RC_BAD_CREDENTIAL 0x58490007u /* the manager's credential does not unmarshal */
#define XIGN_TPM_RC_GRACE_OVER   0x58490008u /* a verifier's policy refused: the TPM's Clock is past its deadline */
#define XIGN_TPM_RC_CLOCK_UNSAFE 0x58490009u /* the TPM's Clock is not safe: reset without TPM2_Shutdown, it may show less than it did */
#define XIGN_TPM_RC_OLD_VERIFIER 0x5849000Au /* a verifier made before adminWithPolicy and the safe Clock: not used */

/* A key as stored: Tss2_MU-marshalled TPM2B_PUBLIC and TPM2B_PRIVATE, and the name of the SRK it lives under. */
typedef struct xign_tpm_blob {
    uint8_t public_area[1024];
    size_t public_size;
    uint8_t private_area[1024];
    size_t private_size;
    uint8_t srk_name[68];
    size_t srk_name_size;
} xign_tpm_blob;

/* Opens the TPM through a TCTI configuration such as "device:/dev/tpmrm0" or "swtpm:path=/run/s". Never NULL. */
uint32_t xign_tpm_open(const char *tcti, xign_tpm **out);
void xign_tpm_close(xign_tpm *tpm);

/* The SRK's name, created on demand (for `xign-setup doctor`). */
uint32_t xign_tpm_srk_name(xign_tpm *tpm, uint8_t name[68], size_t *name_size);

/* Creates a P-256 signing key under the SRK. point receives the uncompressed public point (65 bytes). */
uint32_t xign_tpm_create_key(xign_tpm *tpm, xign_tpm_blob *blob, uint8_t point[65]);

/* Creates an HMAC-SHA256 key under the SRK; the TPM generates it and never releases it. */
uint32_t xign_tpm_create_hmac_key(xign_tpm *tpm, xign_tpm_blob *blob);

/* Loads a stored key under its SRK; it stays loaded in this context until xign_tpm_close. */
uint32_t xign_tpm_load(xign_tpm *tpm, const xign_tpm_blob *blob, uint32_t *handle);

/* HMAC-SHA256 of at most 1024 bytes with a loaded HMAC key. */
uint32_t xign_tpm_hmac(xign_tpm *tpm, uint32_t handle, const uint8_t *data, size_t size, uint8_t mac[32]);

/* The public point of a stored key, without the TPM. */
uint32_t xign_tpm_blob_point(const xign_tpm_blob *blob, uint8_t point[65]);

/* Loads the key under its SRK and signs a SHA-256 digest; signature receives r || s (64 bytes). */
uint32_t xign_tpm_sign(xign_tpm *tpm, const xign_tpm_blob *blob, const uint8_t digest[32], uint8_t signature[64]);

/* Creates the offline PIN verifier: an HMAC key under the SRK, not noDA (the TPM counts every wrong value in its
 * lockout counter), usable only through a policy in every role (adminWithPolicy): the TPM's Clock below `deadline`
 * (milliseconds) and safe, then the authorization value `auth` (1 to 32 bytes). `auth` reaches the TPM encrypted to
 * the SRK. */
uint32_t xign_tpm_create_verifier(xign_tpm *tpm, const uint8_t *auth, size_t auth_size, uint64_t deadline, xign_tpm_blob *blob);

/* Proves `auth` to a verifier with one TPM2_HMAC in a policy session salted to the SRK, so the bus never carries a
 * value that a PIN could be guessed against. XIGN_TPM_RC_WRONG_AUTH when the TPM refused it (and counted it);
 * XIGN_TPM_RC_GRACE_OVER when its Clock is at or past `deadline`, XIGN_TPM_RC_CLOCK_UNSAFE when its Clock is not
 * safe, XIGN_TPM_RC_OLD_VERIFIER for a verifier without adminWithPolicy (nothing counted). */
uint32_t xign_tpm_check_verifier(xign_tpm *tpm, const xign_tpm_blob *blob, const uint8_t *auth, size_t auth_size, uint64_t deadline);

/* The TPM's Clock: milliseconds it has run since it was last cleared, and whether it is safe (it never went back
 * below a value it showed: after a reset without TPM2_Shutdown it is not, until it passes the value it last saved). */
uint32_t xign_tpm_read_clock(xign_tpm *tpm, uint64_t *clock, int *safe);

/* Sets a random lockout authorization where it is empty and forgets it (docs/security.md, "Offline login"). */
uint32_t xign_tpm_take_lockout(xign_tpm *tpm);

/* The TPM's dictionary-attack state (TPM2_PT_LOCKOUT_COUNTER and the parameters tpm2_dictionarylockout sets). */
typedef struct xign_tpm_lockout {
    uint32_t counter;
    uint32_t max_tries;
    uint32_t recovery_seconds;
    uint32_t lockout_recovery_seconds;
    int in_lockout;
    int lockout_auth_set; /* TPMA_PERMANENT_LOCKOUTAUTHSET */
} xign_tpm_lockout;
uint32_t xign_tpm_read_lockout(xign_tpm *tpm, xign_tpm_lockout *out);

/* The EK certificates a TPM's maker may store, by the key they certify: RSA 2048 (NV 0x01c00002, template L-1),
 * NIST P-256 (0x01c0000a, L-2) and NIST P-384 (0x01c00016, H-3). */
typedef enum xign_tpm_ek_kind { XIGN_TPM_EK_RSA2048 = 0, XIGN_TPM_EK_P256 = 1, XIGN_TPM_EK_P384 = 2 } xign_tpm_ek_kind;

/* Reads the DER EK certificate of `kind`; XIGN_TPM_RC_NO_EK_CERTIFICATE when its index is not defined. */
uint32_t xign_tpm_read_ek_certificate(xign_tpm *tpm, xign_tpm_ek_kind kind, uint8_t *out, size_t capacity, size_t *size);

/* Creates an attestation key under the SRK: restricted, P-256, ECDSA-SHA256. Its blob's public area is what the
 * manager names it by. */
uint32_t xign_tpm_create_ak(xign_tpm *tpm, xign_tpm_blob *blob);

/* TPM2_ActivateCredential with the AK and the EK of `kind`: the TPM releases the manager's secret (at most 64 bytes)
 * only if the credential was made for that EK and this AK's name. `credential` is a marshalled TPM2B_ID_OBJECT,
 * `secret` a marshalled TPM2B_ENCRYPTED_SECRET. */
uint32_t xign_tpm_activate_credential(xign_tpm *tpm, xign_tpm_ek_kind kind, const xign_tpm_blob *ak, const uint8_t *credential,
                                      size_t credential_size, const uint8_t *secret, size_t secret_size, uint8_t out[64], size_t *out_size);

/* TPM2_Certify of `key` by `ak` over `qualifying` (at most 64 bytes): the TPMS_ATTEST as the TPM marshalled it, and
 * the AK's ECDSA signature of it, r || s. */
uint32_t xign_tpm_certify(xign_tpm *tpm, const xign_tpm_blob *ak, const xign_tpm_blob *key, const uint8_t *qualifying,
                          size_t qualifying_size, uint8_t *attest, size_t capacity, size_t *attest_size, uint8_t signature[64]);

/* A short text for a return code. */
const char *xign_tpm_describe(uint32_t rc);

#endif
