import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// Whether a device may act: still enrolled, of a kind the manager and the service accept (`require_hardware_key`,
/// judged on what attestation found), and not locked.
enum DeviceEligibility {
    /// What the manager found a TPM key to be. A software key or a passkey has no finding (nil): there is nothing to
    /// attest.
    enum KeyFinding: Sendable, Equatable {
        /// Proven to be in a TPM whose EK certificate `issuer` issued, and that chains to a trusted CA.
        case attested(issuer: String)
        /// Not proven; `because` says what is missing.
        case unattested(because: String)

        var ekIssuer: String? { if case .attested(let issuer) = self { issuer } else { nil } }
        var unattestedBecause: String? { if case .unattested(let because) = self { because } else { nil } }

        init(ekIssuer: String?, unattestedBecause: String?) {
            self =
                ekIssuer.map { .attested(issuer: $0) }
                ?? .unattested(because: unattestedBecause ?? "it was registered before keys were attested")
        }
    }

    /// Why a key of `kind` (a passkey that may be `synced`) that was found to be `finding` does not meet
    /// `requirement`, or nil when it does.
    static func refusal(
        of requirement: HardwareKeyRequirement, kind: KeyKind, synced: Bool = false, finding: KeyFinding?, what: String
    ) -> String? {
        switch requirement {
        case .none:
            return nil
        case .claimed:
            if kind == .software { return "accepts only hardware-bound (TPM) \(what) keys; this one is a software key" }
            if kind == .passkey && synced {
                return "accepts only device-bound keys; this passkey is copied to other devices (synced)"
            }
            return nil
        case .attested:
            switch (kind, finding) {
            case (.software, _): return "accepts only attested TPM \(what) keys; this one is a software key"
            case (.passkey, _): return "accepts only attested TPM \(what) keys; a passkey's maker is not checked here"
            case (.tpm, .attested?): return nil
            case (.tpm, .unattested(let because)?):
                return "accepts only attested TPM \(what) keys; this one is not attested: \(because)"
            case (.tpm, nil): return "accepts only attested TPM \(what) keys; this one is not attested"
            }
        }
    }

    /// How the audit, the logs and the device notice name a key.
    static func keyDescription(_ kind: KeyKind, passkey: ManagerStore.Passkey? = nil, finding: KeyFinding?) -> String {
        if let passkey { return passkey.backupEligible ? "synced passkey" : "passkey" }
        guard kind == .tpm else { return "\(kind.rawValue) key" }
        guard let issuer = finding?.ekIssuer else { return "tpm key, not attested" }
        return "tpm key, attested (EK issuer \(issuer.prefix(200)))"
    }

    static func securityInsufficient(_ refusal: String, who: String, then advice: String) -> ManagerError {
        ManagerError(.forbidden, .securityInsufficient, "\(who) \(refusal); \(advice)")
    }

    /// A device that still holds its activation, or the error that says to personalize again.
    static func enrolledDevice(_ id: String, in store: ManagerStore) async throws -> ManagerStore.DeviceRecord {
        guard let device = try await store.device(id, holdingItsActivation: true) else {
            throw ManagerError(
                .notFound, .deviceNotFound,
                "this device is not enrolled (or was removed) at this manager; personalize it again with xign-setup")
        }
        return device
    }

    /// A device that may start an authentication now, and its activation: enrolled, of a kind the manager and the
    /// service accept (`requirement` is the stricter of theirs), and not locked (a lock in force answers 423 before any
    /// PIN is asked for).
    static func authenticatingDevice(
        _ id: String, requirement: HardwareKeyRequirement, in store: ManagerStore
    ) async throws -> (ManagerStore.DeviceRecord, ManagerStore.ActivationRecord) {
        try await authenticating(try await enrolledDevice(id, in: store), requirement: requirement, in: store)
    }

    /// The same for a device already read as enrolled (`enrolledDevice`, or a signature check that asked for it).
    static func authenticating(
        _ device: ManagerStore.DeviceRecord, requirement: HardwareKeyRequirement, in store: ManagerStore
    ) async throws -> (ManagerStore.DeviceRecord, ManagerStore.ActivationRecord) {
        let finding = KeyFinding(ekIssuer: device.ekIssuer, unattestedBecause: device.unattestedBecause)
        if let refusal = refusal(
            of: requirement, kind: device.keyKind, synced: device.passkey?.isSynced == true, finding: finding,
            what: "device")
        {
            throw securityInsufficient(
                refusal, who: "this login",
                then: requirement == .attested
                    ? "personalize again on a machine whose TPM the manager trusts"
                    : "personalize again with device_key = tpm")
        }
        guard let activation = try await store.activation(id: device.activationId) else {
            throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
        }
        if activation.accountLockedAt != nil { throw ManagerError.accountLocked }
        if let lock = activation.pendingLock { throw ManagerError.lockedOut(lock) }
        return (device, activation)
    }

}
