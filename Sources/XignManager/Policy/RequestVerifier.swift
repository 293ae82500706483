import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignWebAuthn

/// The one check of a signed request (docs/design.md, invariant 3): a device's P-256 signature or a passkey's
/// assertion, or a host's signature, over the method, the path, the body and a single-use challenge.
struct RequestVerifier: Sendable {
    /// The manager's public URL; read per request, since a manager on port 0 knows it only once it listens.
    let managerURL: @Sendable () -> ManagerURL
    let requireHardwareKey: HardwareKeyRequirement

    /// The manager as a WebAuthn relying party: the origin of its public URL, and that URL's host as the RP id. A
    /// passkey is bound to it, so the public URL must not change once browsers enrolled.
    var relyingParty: RelyingParty {
        let url = managerURL()
        return RelyingParty(origin: url.origin, id: url.host.trimmingCharacters(in: ["[", "]"]))
    }

    /// Who signed a request, for the refusal.
    enum Signer: String { case device, host }

    /// The one check of a signed request (docs/design.md, invariant 3): the signature covers the method, the path,
    /// the body and a single-use challenge. Spending the challenge is the caller's, in the transaction that acts.
    static func checkSignature(
        _ signature: Data, by key: P256PublicKey, of signer: Signer, path: String, body: Data, challenge: String
    ) throws {
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        guard key.isValidSignature(signature, for: message) else {
            throw ManagerError(.unauthorized, .signatureInvalid, "the \(signer.rawValue) signature does not verify")
        }
    }

    /// How a device proves a request: a raw P-256 signature, or a passkey's assertion. Read before anything is looked
    /// up, so an unsigned or garbled request is refused (401) without touching a row.
    enum DeviceProof {
        case signature(Data)
        case assertion(PasskeyAssertion)

        init(header: String?) throws {
            do {
                if let header, let assertion = try PasskeyAssertion(header: header) {
                    self = .assertion(assertion)
                    return
                }
            } catch {
                throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's assertion is refused: \(error)")
            }
            self = .signature(try RequestVerifier.signature(from: header))
        }
    }

    /// The one check that `device` signed a request (docs/design.md, invariant 3): with its P-256 key, or for a
    /// passkey with an assertion whose WebAuthn challenge is SHA-256 of the same canonical message. A passkey's counter
    /// moves in the caller's transaction, so one assertion is accepted once even when sent twice at the same moment.
    func checkDeviceProof(
        _ proof: DeviceProof, of device: ManagerStore.DeviceRecord, path: String, body: Data, challenge: String,
        in store: ManagerStore
    ) async throws {
        switch (proof, device.passkey) {
        case (.signature(let raw), nil):
            try Self.checkSignature(
                raw, by: device.publicKey, of: .device, path: path, body: body, challenge: challenge)
        case (.assertion(let assertion), let passkey?):
            let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
            let result: AssertionResult
            do {
                result = try relyingParty.verifyAssertion(
                    assertion, publicKey: device.publicKey, challenge: SHA256.hash(message),
                    storedSignCount: passkey.signCount)
            } catch {
                throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's assertion is refused: \(error)")
            }
            // The BE flag is fixed at a credential's creation (WebAuthn L3 §7.2, step 17): one that differs from the
            // stored flag is not the authenticator that was enrolled.
            guard result.isBackupEligible == passkey.backupEligible else {
                throw ManagerError(
                    .unauthorized, .signatureInvalid,
                    "the passkey's assertion says backup eligible \(result.isBackupEligible ? "yes" : "no"), but it was enrolled with \(passkey.backupEligible ? "yes" : "no"): not the authenticator that was enrolled"
                )
            }
            if requireHardwareKey >= .claimed && (result.isBackedUp || result.isBackupEligible) {
                throw ManagerError(
                    .forbidden, .securityInsufficient,
                    "this passkey is synced, or may be (backup eligible), and this manager accepts only device-bound keys"
                )
            }
            guard
                try await store.advanceSignCount(
                    ofDevice: device.id, from: passkey.signCount, to: result.signCount, backedUp: result.isBackedUp)
            else {
                throw ManagerError(.unauthorized, .signatureInvalid, "the passkey's assertion was used already")
            }
        case (.signature, _?):
            throw ManagerError(
                .unauthorized, .signatureInvalid,
                "a passkey device signs with a WebAuthn assertion (\(PasskeyAssertion.prefix)…)")
        case (.assertion, nil):
            throw ManagerError(
                .unauthorized, .signatureInvalid, "this device signs with its key, not with a passkey's assertion")
        }
    }

    /// The raw r || s of a device-signed request's signature header.
    static func signature(from header: String?) throws -> Data {
        guard let header, let raw = Base64URL.decode(header) else {
            throw ManagerError(
                .unauthorized, .signatureInvalid, "the request carries no valid \(SignedRequest.signatureHeader) header"
            )
        }
        return raw
    }

    /// Verifies a request signed by an enrolled device and consumes its challenge. Returns the device.
    @discardableResult
    /// `holdingItsActivation`: only a device that still holds its activation (one that may log in) proves itself.
    func verifyDeviceSignature(
        deviceId: String, challenge: String, path: String, body: Data, signature: String?,
        holdingItsActivation: Bool = false, in store: ManagerStore
    ) async throws -> ManagerStore.DeviceRecord {
        let proof = try DeviceProof(header: signature)
        guard let device = try await store.device(deviceId, holdingItsActivation: holdingItsActivation) else {
            throw ManagerError(
                .notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager")
        }
        try await checkDeviceProof(proof, of: device, path: path, body: body, challenge: challenge, in: store)
        guard try await store.consumeDeviceChallenge(challenge, deviceId: deviceId, now: IdentityManager.now()) else {
            throw ManagerError(
                .conflict, .challengeInvalid, "the challenge is unknown, expired or was already used; request a new one"
            )
        }
        return device
    }

}
