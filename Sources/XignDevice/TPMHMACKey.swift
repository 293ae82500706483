import CXignTPM
import FoundationEssentials
import Synchronization

/// An HMAC-SHA256 key that the TPM generated and never releases: xign-manager's PIN pepper with
/// `pin_pepper = tpm`. Its blob (the same container as a device key's) is useless without this TPM.
///
/// The TPM context stays open with the key loaded, so a check costs one TPM2_HMAC, not a fresh SRK.
/// Calls are serialized; after a failure the next call opens the TPM again.
public final class TPMHMACKey: Sendable {
    private struct Loaded {
        var tpm: OpaquePointer
        var handle: UInt32
    }

    private let tcti: String
    private let blob: xign_tpm_blob
    private let loaded: Mutex<Loaded?>

    /// Creates a key in the TPM and returns its blob, to be stored 0600.
    public static func create(tcti: String) throws -> Data {
        var blob = xign_tpm_blob()
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            let rc = xign_tpm_create_hmac_key(tpm, &blob)
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        return TPMDeviceKeyStore.encode(blob)
    }

    /// Loads the key now, so a blob from another TPM (or a cleared one) fails at start, not at the first login.
    public init(tcti: String, blob: Data) throws {
        self.tcti = tcti
        self.blob = try TPMDeviceKeyStore.decode(blob)
        let first = try Self.load(tcti: tcti, blob: self.blob)
        loaded = Mutex(first)
    }

    deinit {
        loaded.withLock { if let current = $0 { xign_tpm_close(current.tpm) } }
    }

    private static func load(tcti: String, blob: xign_tpm_blob) throws -> Loaded {
        var tpm: OpaquePointer?
        var rc = xign_tpm_open(tcti, &tpm)
        guard rc == 0, let tpm else { throw TPMFailure.from(rc) }
        var handle: UInt32 = 0
        var copy = blob
        rc = xign_tpm_load(tpm, &copy, &handle)
        guard rc == 0 else {
            xign_tpm_close(tpm)
            throw TPMFailure.from(rc)
        }
        return Loaded(tpm: tpm, handle: handle)
    }

    public func authenticationCode(for message: Data) throws -> Data {
        try loaded.withLock { current in
            let key = try current ?? Self.load(tcti: tcti, blob: blob)
            var mac = [UInt8](repeating: 0, count: 32)
            let rc = [UInt8](message).withUnsafeBufferPointer {
                xign_tpm_hmac(key.tpm, key.handle, $0.baseAddress, $0.count, &mac)
            }
            guard rc == 0 else {
                xign_tpm_close(key.tpm)
                current = nil
                throw TPMFailure.from(rc)
            }
            current = key
            return Data(mac)
        }
    }
}
