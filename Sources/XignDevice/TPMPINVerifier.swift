import CXignTPM
import FoundationEssentials

/// The TPM's dictionary-attack protection as it stands: how many failures it has counted, how many it allows before
/// it refuses every protected object, and how it recovers.
public struct TPMLockoutState: Sendable, Equatable {
    public var failures: Int
    public var maxTries: Int
    /// One failure is forgotten per interval.
    public var recoverySeconds: Int
    /// How long a failed lockout-hierarchy authorization blocks the reset.
    public var lockoutRecoverySeconds: Int
    public var isLockedOut: Bool
}

/// Offline PIN verifiers: TPM objects whose authorization value is derived from a PIN and which the TPM protects with
/// its dictionary-attack counter (docs/security.md, "Offline login"). The file `<reference>.pinverifier` holds the
/// SRK name and the Tss2_MU blobs, mode 0600; it is useless without this TPM and the PIN.
public struct TPMPINVerifierStore: Sendable {
    public let directory: String
    public let tcti: String

    public init(directory: String, tcti: String) {
        self.directory = directory
        self.tcti = tcti
    }

    private var files: KeyFiles { KeyFiles(directory: directory, suffix: ".pinverifier") }

    /// Creates a verifier for `authorization` (1 to 32 bytes, derived from the PIN) beside the device key `keyReference`,
    /// and returns its reference.
    public func create(authorization: Data, beside keyReference: String) throws -> String {
        var blob = xign_tpm_blob()
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            let rc = [UInt8](authorization).withUnsafeBufferPointer { xign_tpm_create_verifier(tpm, $0.baseAddress, $0.count, &blob) }
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        return try files.writePending(TPMDeviceKeyStore.encode(blob), prefix: "\(keyReference)-offline-")
    }

    /// Whether the TPM accepts `authorization`. A wrong one is counted by the TPM; in its lockout it is not tried
    /// (`TPMFailure.lockout`), and a verifier from another TPM or a cleared one does not load.
    public func check(_ reference: String, authorization: Data) throws -> Bool {
        var blob = try TPMDeviceKeyStore.decode(try files.read(reference))
        return try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            let rc = [UInt8](authorization).withUnsafeBufferPointer { xign_tpm_check_verifier(tpm, &blob, $0.baseAddress, $0.count) }
            if rc == XIGN_TPM_RC_WRONG_AUTH { return false }
            guard rc == 0 else { throw TPMFailure.from(rc) }
            return true
        }
    }

    public func delete(_ reference: String) throws { try files.delete(reference) }

    public func lockoutState() throws -> TPMLockoutState {
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            var state = xign_tpm_lockout()
            let rc = xign_tpm_read_lockout(tpm, &state)
            guard rc == 0 else { throw TPMFailure.from(rc) }
            return TPMLockoutState(
                failures: Int(state.counter), maxTries: Int(state.max_tries), recoverySeconds: Int(state.recovery_seconds),
                lockoutRecoverySeconds: Int(state.lockout_recovery_seconds), isLockedOut: state.in_lockout != 0)
        }
    }
}
