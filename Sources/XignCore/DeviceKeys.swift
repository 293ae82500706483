import FoundationEssentials
import XignCrypto
import XignDevice

/// The machine's key stores: new keys go where the config says; each enrolment's key loads from the store it was made in.
struct DeviceKeys {
    let software: SoftwareDeviceKeyStore
    let tpm: TPMDeviceKeyStore
    let preference: ClientConfiguration.DeviceKeyPreference
    private let tpmCheck = TPMCheck()

    /// The store new keys are created in, and a warning when `auto` found no usable TPM. Only `auto` probes the
    /// TPM, once, and only when a key is made: a login loads its key from the store it was made in.
    func storeForNewKeys() -> (store: any DeviceKeyStore, warning: String?) {
        switch preference {
        case .software: return (software, nil)
        case .tpm: return (tpm, nil)
        case .auto:
            guard let failure = tpmCheck.failure(of: tpm) else { return (tpm, nil) }
            return (
                software,
                "no usable TPM (\(failure)); this key is a software key, which a copy of the disk can use (device_key = auto)"
            )
        }
    }

    func store(for kind: KeyKind) -> any DeviceKeyStore {
        kind == .tpm ? tpm : software
    }

    /// The key named `reference` in the store of its `kind`, with the failure as an SDK error.
    func load(_ kind: KeyKind, _ reference: String, what: String) throws -> any DeviceKey {
        do { return try store(for: kind).load(reference) } catch {
            throw Self.error(error, doing: "cannot load the \(what) key")
        }
    }

    /// An SDK error for a key failure: TPM conditions that may pass get their own code.
    static func error(_ error: any Error, doing what: String) -> XignSdkError {
        if let failure = error as? TPMFailure {
            switch failure {
            case .unavailable, .busy, .lockout, .ownerAuthorization:
                return XignSdkError(.tpmUnavailable, failure.description)
            default: return XignSdkError(.deviceKeyFailure, failure.description)
            }
        }
        if let failure = error as? XignSdkError { return failure }
        return XignSdkError(.deviceKeyFailure, "\(what): \(error)")
    }

    /// A new key for a device (personalization) or a host (join), from creation to the saved enrolment. The key is
    /// made in the preferred store under a pending name; `register` asks the manager with it and returns the
    /// enrolment, which names the key's `reference`. Then the key is committed, `save` stores the enrolment and
    /// returns the keys it replaced, and those are deleted. A failure before the commit leaves no key behind; an
    /// enrolment that cannot be saved takes its key with it. `what` and `retry` word the errors ("device",
    /// "personalize again").
    func register<Enrolment>(
        _ what: String, retry: String,
        _ register: (_ key: any DeviceKey, _ publicKey: String, _ kind: KeyKind, _ reference: String) throws ->
            Enrolment,
        save: (Enrolment) throws -> [(kind: KeyKind, reference: String)]
    ) throws -> Enrolment {
        let keyStore = storeForNewKeys().store
        // Named here, never after the manager's answer: hostile activation data cannot pick the file a key lands in.
        let reference: String
        do { reference = "key-" + (try SecureRandom.token(byteCount: 12)) } catch {
            throw XignSdkError(.deviceKeyFailure, "no randomness available: \(error)")
        }
        let (key, pending): (any DeviceKey, String)
        do { (key, pending) = try keyStore.createPendingKey() } catch {
            throw Self.error(error, doing: "cannot create the \(what) key")
        }
        var committed = false
        defer { if !committed { try? keyStore.delete(pending) } }
        let publicKey: String
        do { publicKey = Base64URL.encode(try key.publicKey.derRepresentation) } catch {
            throw XignSdkError(.deviceKeyFailure, "cannot read the new \(what) key: \(error)")
        }
        let enrolment = try register(key, publicKey, keyStore.kind, reference)
        do { try keyStore.commit(pending: pending, as: reference) } catch {
            throw XignSdkError(
                .deviceKeyFailure,
                "the manager accepted this \(what) but its key could not be stored (\(error)); free the disk and \(retry)"
            )
        }
        committed = true
        let replaced: [(kind: KeyKind, reference: String)]
        do { replaced = try save(enrolment) } catch {
            try? keyStore.delete(reference)
            throw XignSdkError(
                .stateUnavailable,
                "the manager accepted this \(what) but the enrolment could not be saved (\(error)); fix that and \(retry)"
            )
        }
        for old in replaced where old.reference != reference { try? store(for: old.kind).delete(old.reference) }
        return enrolment
    }
}

/// Whether the TPM answers, asked once.
private final class TPMCheck {
    private var checked: (any Error)??

    func failure(of tpm: TPMDeviceKeyStore) -> (any Error)? {
        if let checked { return checked }
        var failure: (any Error)?
        do { _ = try tpm.probe() } catch { failure = error }
        checked = .some(failure)
        return failure
    }
}
