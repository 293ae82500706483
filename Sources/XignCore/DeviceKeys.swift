import FoundationEssentials
import XignDevice

/// The machine's key stores: new keys go where the config says; each enrolment's key loads from the store it was made in.
struct DeviceKeys {
    let software: SoftwareDeviceKeyStore
    let tpm: TPMDeviceKeyStore
    /// The store new keys are created in.
    let preferred: any DeviceKeyStore

    func store(for kind: String) -> any DeviceKeyStore {
        kind == DeviceKeyKind.tpm.rawValue ? tpm : software
    }

    /// An SDK error for a key failure: TPM conditions that may pass get their own code.
    static func error(_ error: any Error, doing what: String) -> XignSdkError {
        if let failure = error as? TPMFailure {
            switch failure {
            case .unavailable, .busy, .lockout, .ownerAuthorization: return XignSdkError(.tpmUnavailable, failure.description)
            default: return XignSdkError(.deviceKeyFailure, failure.description)
            }
        }
        if let failure = error as? XignSdkError { return failure }
        return XignSdkError(.deviceKeyFailure, "\(what): \(error)")
    }
}
