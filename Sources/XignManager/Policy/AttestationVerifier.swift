import Foundation
import Logging
import XignAttestation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// What the manager checks of a TPM's attestation: that an EK certificate chains to a trusted maker CA, and what a
/// key's certification proves, spending its challenge.
struct AttestationVerifier: Sendable {
    let caDirectory: String
    let logger: Logger

    /// Read at each use, so a CA an administrator adds counts at once.
    func chainRefusal(of certificate: EndorsementCertificate) -> String? {
        let directory = caDirectory
        guard FileManager.default.fileExists(atPath: directory) else {
            return "the manager trusts no maker CA: \(directory) does not exist"
        }
        do {
            return try CertificateAuthorities(directory: directory).refusal(of: certificate)
        } catch {
            logger.error("the attestation CA directory is unusable", metadata: ["error": "\(error)"])
            return "the manager's CA directory is unusable (\(error))"
        }
    }

    /// What `evidence` proves about `key` (the one being registered, claimed to be of `kind`; nil unless that is a TPM
    /// key), spending its challenge in the caller's transaction: a replayed certification finds nothing to spend. The
    /// chain was checked when the challenge was handed out. Without a proof, the client's reason is recorded as it gave
    /// it (sanitized): it can change the words of a refusal, never the refusal.
    func finding(
        _ evidence: AttestationEvidence?, of key: P256PublicKey, kind: KeyKind, purpose: String, in store: ManagerStore
    ) async throws -> DeviceEligibility.KeyFinding? {
        guard kind == .tpm else { return nil }
        guard let attestation = evidence?.attestation else {
            let stated = evidence?.missingBecause.map { DisplayText.sanitized(String($0.prefix(400))) }
            return .unattested(because: stated ?? "the client sent no attestation")
        }
        guard attestation.attestationId.utf8.count <= WireLimit.identifier,
            let challenge = try await store.consumeAttestationChallenge(
                attestation.attestationId, purpose: purpose, now: IdentityManager.now())
        else {
            return .unattested(because: "its attestation is unknown, expired or was used already")
        }
        do {
            try Self.checkCertification(attestation, of: key, answering: challenge)
        } catch {
            return .unattested(because: "the certification failed: \(error)")
        }
        return .attested(issuer: challenge.ekIssuer)
    }

    /// The AK of `challenge` certified a key with TPM-bound attributes whose point is `key`, over the challenge's secret.
    private static func checkCertification(
        _ attestation: KeyAttestationMessage, of key: P256PublicKey,
        answering challenge: ManagerStore.AttestationChallenge
    ) throws {
        guard let keyBytes = Base64URL.decode(attestation.certifiedKey),
            let attest = Base64URL.decode(attestation.attest),
            let signature = Base64URL.decode(attestation.signature),
            let akBytes = Base64URL.decode(challenge.attestationKey)
        else { throw AttestationError("its fields are not base64url") }
        let certified = try TPMPublicArea(tpm2bPublic: keyBytes)
        let certification = try KeyCertification(
            attest: attest, signature: signature, by: try TPMPublicArea(tpm2bPublic: akBytes))
        guard let expected = Base64URL.decode(challenge.secretHash),
            constantTimeEquals(SHA256.hash(certification.extraData), expected)
        else {
            throw AttestationError("it is not over this attestation's secret")
        }
        guard constantTimeEquals(certification.certifiedName, certified.name) else {
            throw AttestationError("it certifies another key")
        }
        guard certified.attributes.isSuperset(of: .boundToItsTPM) else {
            throw AttestationError("the certified key was not made in its TPM or can leave it")
        }
        guard certified.publicKey == key else {
            throw AttestationError("the certified key is not the key being registered")
        }
    }
}
