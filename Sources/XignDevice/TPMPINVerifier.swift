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
    /// Whether the lockout hierarchy has an authorization value; without one, root resets the count at will.
    public var lockoutAuthorizationSet = false

    public init(
        failures: Int, maxTries: Int, recoverySeconds: Int, lockoutRecoverySeconds: Int, isLockedOut: Bool,
        lockoutAuthorizationSet: Bool = false
    ) {
        self.failures = failures
        self.maxTries = maxTries
        self.recoverySeconds = recoverySeconds
        self.lockoutRecoverySeconds = lockoutRecoverySeconds
        self.isLockedOut = isLockedOut
        self.lockoutAuthorizationSet = lockoutAuthorizationSet
    }
}

/// `tpm_lockout` in xign.conf: what xign may do about the TPM's lockout authorization, which decides whether root
/// on this machine can lift the TPM's count of wrong PINs (docs/security.md, "Offline login").
public enum TPMLockoutPolicy: String, Sendable, CaseIterable {
    /// Where it is empty, set a random one and forget it; trust it only where xign set it.
    case take
    /// The organization set it and keeps it off this machine: trust any that is set.
    case organization
    /// Never change the TPM; trust only one xign set before.
    case leave
}

/// What the TPM says now about offline PIN checks: its dictionary-attack state, its Clock, and whether anyone on
/// this machine could lift the bound.
public struct TPMStanding: Sendable, Equatable {
    public var lockout: TPMLockoutState
    /// The TPM's Clock in milliseconds: it runs while the TPM has power and never goes back while it is safe.
    public var clock: UInt64
    /// False after a reset without TPM2_Shutdown, until the Clock passes the value it last saved.
    public var clockSafe: Bool
    /// Why root on this machine could reset or switch off the count of wrong PINs; nil when nobody here can.
    public var unprotectedBecause: String?

    public init(lockout: TPMLockoutState, clock: UInt64, clockSafe: Bool = true, unprotectedBecause: String?) {
        self.lockout = lockout
        self.clock = clock
        self.clockSafe = clockSafe
        self.unprotectedBecause = unprotectedBecause
    }
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

    /// Creates a verifier for `authorization` (1 to 32 bytes, derived from the PIN) beside the device key
    /// `keyReference`, which the TPM lets be used until its Clock has run `graceMilliseconds` more. Under `policy`,
    /// xign first takes an empty lockout authorization; a TPM whose count of wrong PINs root could lift gets no
    /// verifier (`TPMFailure.unprotected`).
    public func create(
        authorization: Data, beside keyReference: String, graceMilliseconds: Int64, policy: TPMLockoutPolicy
    ) throws -> (reference: String, deadline: UInt64) {
        var blob = xign_tpm_blob()
        let deadline = try TPMDeviceKeyStore.withTPM(tcti) { tpm -> UInt64 in
            var state = try Self.lockoutState(tpm)
            if !state.lockoutAuthorizationSet && policy == .take {
                // The marker is written first: a lockout taken without it could never be trusted again.
                let pending = try markers.writePending(try TPMDeviceKeyStore.srkName(tpm))
                let rc = xign_tpm_take_lockout(tpm)
                guard rc == 0 else {
                    try? markers.delete(pending)
                    throw TPMFailure.from(rc)
                }
                try? markers.delete("tpm")
                try markers.commit(pending: pending, as: "tpm")
                state.lockoutAuthorizationSet = true
            }
            if let why = try unprotectedBecause(state, tpm: tpm, policy: policy) { throw TPMFailure.unprotected(why) }
            let deadline = try Self.clock(tpm).milliseconds + UInt64(max(0, graceMilliseconds))
            let rc = [UInt8](authorization).withUnsafeBufferPointer {
                xign_tpm_create_verifier(tpm, $0.baseAddress, $0.count, deadline, &blob)
            }
            guard rc == 0 else { throw TPMFailure.from(rc) }
            return deadline
        }
        return (try files.writePending(TPMDeviceKeyStore.encode(blob), prefix: "\(keyReference)-offline-"), deadline)
    }

    /// Whether the TPM accepts `authorization` before its Clock reaches `deadline`. A wrong one is counted by the TPM;
    /// past the deadline (`TPMFailure.graceOver`), with a Clock that is not safe (`.clockUnsafe`), in its lockout
    /// (`.lockout`) or for a verifier of the older kind (`.oldVerifier`) it is not tried, and a verifier from another
    /// TPM or a cleared one does not load.
    public func check(_ reference: String, authorization: Data, deadline: UInt64) throws -> Bool {
        var blob = try TPMDeviceKeyStore.decode(try files.read(reference))
        return try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            let rc = [UInt8](authorization).withUnsafeBufferPointer {
                xign_tpm_check_verifier(tpm, &blob, $0.baseAddress, $0.count, deadline)
            }
            if rc == XIGN_TPM_RC_WRONG_AUTH { return false }
            guard rc == 0 else { throw TPMFailure.from(rc) }
            return true
        }
    }

    /// The TPM's dictionary-attack state, its Clock, and who could lift the bound, under `policy`.
    public func standing(policy: TPMLockoutPolicy) throws -> TPMStanding {
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            let state = try Self.lockoutState(tpm)
            let clock = try Self.clock(tpm)
            return TPMStanding(
                lockout: state, clock: clock.milliseconds, clockSafe: clock.safe,
                unprotectedBecause: try unprotectedBecause(state, tpm: tpm, policy: policy))
        }
    }

    /// The file that says xign set the lockout authorization: the SRK's name then, so a TPM cleared since (a new
    /// storage seed, and an empty lockout authorization someone else may have set) is not taken for the same.
    private var markers: KeyFiles { KeyFiles(directory: directory, suffix: ".lockout") }

    private func unprotectedBecause(
        _ state: TPMLockoutState, tpm: OpaquePointer, policy: TPMLockoutPolicy
    ) throws -> String? {
        guard state.recoverySeconds > 0 else {
            return "the TPM's dictionary-attack protection is off (recovery time 0), so it does not bound wrong PINs"
        }
        guard state.lockoutAuthorizationSet else {
            return policy == .take
                ? "the TPM's lockout authorization is empty"
                : "the TPM's lockout authorization is empty, so root could reset its count of wrong PINs; set tpm_lockout = take in xign.conf to let xign set a random one and forget it"
        }
        if policy == .organization { return nil }
        guard let taken = try? markers.read("tpm", limit: 68), taken == (try TPMDeviceKeyStore.srkName(tpm)) else {
            return
                "the TPM's lockout authorization was set by another program, which may know it; set tpm_lockout = organization in xign.conf if your organization holds it off this machine"
        }
        return nil
    }

    private static func lockoutState(_ tpm: OpaquePointer) throws -> TPMLockoutState {
        var state = xign_tpm_lockout()
        let rc = xign_tpm_read_lockout(tpm, &state)
        guard rc == 0 else { throw TPMFailure.from(rc) }
        return TPMLockoutState(
            failures: Int(state.counter), maxTries: Int(state.max_tries), recoverySeconds: Int(state.recovery_seconds),
            lockoutRecoverySeconds: Int(state.lockout_recovery_seconds), isLockedOut: state.in_lockout != 0,
            lockoutAuthorizationSet: state.lockout_auth_set != 0)
    }

    private static func clock(_ tpm: OpaquePointer) throws -> (milliseconds: UInt64, safe: Bool) {
        var clock: UInt64 = 0
        var safe: Int32 = 0
        let rc = xign_tpm_read_clock(tpm, &clock, &safe)
        guard rc == 0 else { throw TPMFailure.from(rc) }
        return (clock, safe != 0)
    }

    public func delete(_ reference: String) throws { try files.delete(reference) }

    public func lockoutState() throws -> TPMLockoutState {
        try TPMDeviceKeyStore.withTPM(tcti) { try Self.lockoutState($0) }
    }
}
