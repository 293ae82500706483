import Foundation
import XignAttestation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// TPM key attestation (docs/design.md, "Proven hardware keys"): the manager seals a secret to the TPM's EK for a new
/// attestation key (AK); the AK then certifies the device or host key over that secret. What a key was proven to be is
/// recorded with it, and `require_hardware_key` (the manager's, or a service's) judges it.
extension IdentityManager {
    /// Starts an attestation: checks the EK certificate and the AK, and answers with a credential for the AK. A
    /// certificate that does not chain to a trusted CA is refused here, before the client's TPM does the slow part
    /// (recreating the EK); counted with `decrypts_per_address`, like the check doctor asks for.
    public func startAttestation(body: Data, from client: String) async throws -> AttestationChallengeMessage {
        let request = try RequestBody.decode(AttestationStartRequest.self, from: body, "the attestation request")
        guard let certificateBytes = Base64URL.decode(request.endorsementCertificate),
            let keyBytes = Base64URL.decode(request.attestationKey)
        else {
            throw ManagerError.badRequest("an attestation request carries an EK certificate and a key, in base64url")
        }
        let certificate: EndorsementCertificate
        let attestationKey: TPMPublicArea
        do {
            certificate = try EndorsementCertificate(der: certificateBytes)
            attestationKey = try TPMPublicArea(tpm2bPublic: keyBytes)
        } catch {
            throw ManagerError.badRequest("\(error)")
        }
        guard attestationKey.attributes.isSuperset(of: KeyCertification.attestationKeyAttributes) else {
            throw ManagerError.badRequest("the attestation key is not a restricted signing key that stays in its TPM")
        }
        try await rateLimiter.charge(.decryptsPerAddress, key: client)
        if let refusal = attestations.chainRefusal(of: certificate) {
            throw ManagerError(.forbidden, .securityInsufficient, refusal)
        }
        let secret = try SecureRandom.bytes(32)
        let credential: CredentialChallenge
        do {
            credential = try CredentialChallenge(secret: secret, for: certificate, objectName: attestationKey.name)
        } catch {
            throw ManagerError.badRequest("\(error)")
        }
        let purpose = request.sessionId.map { "session:\($0)" } ?? "host:\(Self.hashed(request.joinSecret ?? ""))"
        let challenge = ManagerStore.AttestationChallenge(
            id: try SecureRandom.identifier(), purpose: purpose, secretHash: Base64URL.encode(SHA256.hash(secret)),
            attestationKey: request.attestationKey, ekIssuer: String(certificate.issuer.prefix(500)),
            expiresAt: Self.now() + configuration.sessionLifetimeMilliseconds)
        try await database.transaction(durability: .unsynced) { store in
            let now = Self.now()
            if let sessionId = request.sessionId {
                guard let session = try await store.personalizationSession(sessionId), session.expiresAt > now else {
                    throw ManagerError(
                        .conflict, .sessionInvalid,
                        "the personalization session is unknown, used or expired; start again")
                }
            } else if try await !store.isHostJoinTokenValid(hash: Self.hashed(request.joinSecret ?? ""), now: now) {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "the join token is unknown, used or expired; ask the administrator for a new one")
            }
            try await store.insertAttestationChallenge(challenge)
        }
        return AttestationChallengeMessage(
            attestationId: challenge.id, credentialBlob: Base64URL.encode(credential.credentialBlob),
            encryptedSecret: Base64URL.encode(credential.encryptedSecret))
    }

    /// Whether an EK certificate chains to a trusted CA, for `xign-setup doctor`.
    public func checkEndorsement(
        _ request: EndorsementCheckRequest, from client: String
    ) async throws -> EndorsementCheckMessage {
        try await rateLimiter.charge(.decryptsPerAddress, key: client)
        guard let bytes = Base64URL.decode(request.endorsementCertificate) else {
            throw ManagerError.badRequest("endorsementCertificate is not base64url DER")
        }
        let certificate: EndorsementCertificate
        do { certificate = try EndorsementCertificate(der: bytes) } catch { throw ManagerError.badRequest("\(error)") }
        let refusal = attestations.chainRefusal(of: certificate)
        return EndorsementCheckMessage(issuer: certificate.issuer, accepted: refusal == nil, refusal: refusal)
    }
}
