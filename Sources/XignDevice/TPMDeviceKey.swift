import CXignTPM
import FoundationEssentials
import XignCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Why a TPM operation failed, with what the user can do about it.
public enum TPMFailure: Error, Equatable, CustomStringConvertible {
    /// No TPM behind the TCTI (no device, no permission, no simulator).
    case unavailable(String)
    /// The TPM is busy or asked to retry.
    case busy(String)
    /// The key's storage root is gone: the TPM was cleared (or this is another TPM).
    case cleared
    /// The stored blob is damaged or belongs to another TPM.
    case keyDoesNotLoad(String)
    /// The TPM's dictionary-attack protection is in lockout.
    case lockout
    /// The owner hierarchy has a password, so the storage root key cannot be derived.
    case ownerAuthorization
    /// Root on this machine could lift the TPM's count of wrong PINs, so it checks no PIN offline; the text says why.
    case unprotected(String)
    /// An offline PIN verifier's policy refused: the TPM's Clock is past the grace.
    case graceOver
    /// The TPM's Clock is not safe: reset without TPM2_Shutdown (a power cut), it may show less than it did.
    case clockUnsafe
    /// An offline PIN verifier made before every use of it went through its policy; the next online login replaces it.
    case oldVerifier
    case other(String)

    public var description: String {
        switch self {
        case .unavailable(let why):
            return "no TPM is available (\(why)); check tcti in /etc/xign/xign.conf, or set device_key = software"
        case .busy(let why): return "the TPM is busy (\(why)); try again in a moment"
        case .cleared:
            return "the TPM was cleared, so this machine's device key is gone; enroll again with xign-setup personalize"
        case .keyDoesNotLoad(let why):
            return "the device key does not load into this TPM (\(why)); enroll again with xign-setup personalize"
        case .lockout:
            return
                "the TPM is in dictionary-attack lockout; wait for it to recover or have an administrator reset it (tpm2_dictionarylockout --clear-lockout)"
        case .ownerAuthorization:
            return
                "the TPM's owner hierarchy has a password, so xign cannot derive its storage key; an administrator can remove it (tpm2_changeauth -c owner -p OLD)"
        case .unprotected(let why): return "offline login is not offered: \(why)"
        case .graceOver: return "the TPM's clock says the offline grace is over; connect to the network and log in once"
        case .clockUnsafe:
            return
                "the TPM's clock is not trusted after the machine lost power without shutting down; offline login comes back within about 70 minutes of running, or connect to the network"
        case .oldVerifier:
            return "the offline PIN check of this enrolment is of an older kind; connect to the network and log in once"
        case .other(let why): return "the TPM failed: \(why)"
        }
    }

    /// Maps a TSS2 return code. Bits 16–23 name the layer that failed; in the TPM's own codes
    /// (layer 0, or 12 when a resource manager passes them on) format 1 (bit 7) carries a parameter number.
    static func from(_ rc: UInt32) -> TPMFailure {
        let text = String(cString: xign_tpm_describe(rc))
        switch rc {
        case XIGN_TPM_RC_SRK_MISMATCH: return .cleared
        case XIGN_TPM_RC_GRACE_OVER: return .graceOver
        case XIGN_TPM_RC_CLOCK_UNSAFE: return .clockUnsafe
        case XIGN_TPM_RC_OLD_VERIFIER: return .oldVerifier
        case XIGN_TPM_RC_BAD_BLOB: return .keyDoesNotLoad(text)
        case XIGN_TPM_RC_BAD_CREDENTIAL, XIGN_TPM_RC_NO_EK_CERTIFICATE: return .other(text)
        default: break
        }
        let layer = rc >> 16
        let base = rc & 0xFFFF
        switch layer {
        case 0, 12:
            if base & 0x080 != 0 {
                // TPM_RC_INTEGRITY, TPM_RC_KEY, TPM_RC_SIZE, TPM_RC_VALUE on a load: the blob was not made by this TPM's current seed.
                let number = 0x080 | (base & 0x03F)
                if [0x09F, 0x09C, 0x095, 0x084].contains(number) { return .keyDoesNotLoad(text) }
                // TPM_RC_BAD_AUTH, TPM_RC_AUTH_FAIL
                if number == 0x0A2 || number == 0x08E { return .ownerAuthorization }
                return .other(text)
            }
            switch base {
            case 0x921: return .lockout
            // RETRY, YIELDED, CANCELED; OBJECT_MEMORY and SESSION_MEMORY (full slots, without a resource manager).
            case 0x922, 0x908, 0x909, 0x902, 0x903: return .busy(text)
            default: return .other(text)
            }
        case 9:
            return .keyDoesNotLoad(text)
        default:
            // TCTI, SYS, ESAPI, resource manager: the TPM could not be reached or answer.
            return base == 9 ? .busy(text) : .unavailable(text)
        }
    }
}

/// A P-256 key that lives in the TPM; only its TPM-wrapped blob is on disk.
public struct TPMDeviceKey: DeviceKey {
    let tcti: String
    let blob: xign_tpm_blob
    let point: Data

    public var kind: KeyKind { .tpm }
    public var publicKey: P256PublicKey { get throws { try P256PublicKey(x963Representation: point) } }

    public func signature(for message: Data) throws -> Data {
        let digest = [UInt8](SHA256.hash(message))
        var signature = [UInt8](repeating: 0, count: 64)
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            var blob = self.blob
            let rc = xign_tpm_sign(tpm, &blob, digest, &signature)
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        return Data(signature)
    }
}

/// Device keys in the TPM. The file `<reference>.tpm` holds the SRK name and the Tss2_MU blobs, mode 0600.
public struct TPMDeviceKeyStore: DeviceKeyStore {
    public let directory: String
    /// The TCTI configuration, e.g. "device:/dev/tpmrm0"; never empty, so libtss2 never guesses.
    public let tcti: String
    public var kind: KeyKind { .tpm }

    public init(directory: String, tcti: String) {
        self.directory = directory
        self.tcti = tcti
    }

    static func withTPM<T>(_ tcti: String, _ body: (OpaquePointer) throws -> T) throws -> T {
        var tpm: OpaquePointer?
        let rc = xign_tpm_open(tcti, &tpm)
        guard rc == 0, let tpm else { throw TPMFailure.from(rc) }
        defer { xign_tpm_close(tpm) }
        return try body(tpm)
    }

    /// Opens the TPM and derives the SRK: whether a TPM is there and usable. Returns the SRK name.
    public func probe() throws -> Data {
        try Self.withTPM(tcti, Self.srkName)
    }

    /// The SRK's name in an open TPM, created on demand.
    static func srkName(_ tpm: OpaquePointer) throws -> Data {
        var name = [UInt8](repeating: 0, count: 68)
        var size = 0
        let rc = xign_tpm_srk_name(tpm, &name, &size)
        guard rc == 0 else { throw TPMFailure.from(rc) }
        return Data(name.prefix(size))
    }

    private var files: KeyFiles { KeyFiles(directory: directory, suffix: ".tpm") }

    static let magic = Array("XIGNTPM1".utf8)

    /// magic, then three length-prefixed (UInt16 big-endian) fields: SRK name, TPM2B_PUBLIC, TPM2B_PRIVATE.
    static func encode(_ blob: xign_tpm_blob) -> Data {
        var out = magic
        var copy = blob
        func field(_ bytes: UnsafeRawBufferPointer, _ size: Int) {
            out += [UInt8(size >> 8), UInt8(size & 0xFF)]
            out += bytes.prefix(size)
        }
        withUnsafeBytes(of: &copy.srk_name) { field($0, blob.srk_name_size) }
        withUnsafeBytes(of: &copy.public_area) { field($0, blob.public_size) }
        withUnsafeBytes(of: &copy.private_area) { field($0, blob.private_size) }
        return Data(out)
    }

    static func decode(_ data: Data) throws -> xign_tpm_blob {
        var bytes = [UInt8](data)[...]
        guard bytes.starts(with: magic) else { throw TPMFailure.keyDoesNotLoad("not an xign TPM key file") }
        bytes = bytes.dropFirst(magic.count)
        var blob = xign_tpm_blob()
        func field(_ capacity: Int, into target: UnsafeMutableRawBufferPointer) throws -> Int {
            guard bytes.count >= 2 else { throw TPMFailure.keyDoesNotLoad("the key file is truncated") }
            let size = Int(bytes[bytes.startIndex]) << 8 | Int(bytes[bytes.startIndex + 1])
            bytes = bytes.dropFirst(2)
            guard size <= capacity, bytes.count >= size else {
                throw TPMFailure.keyDoesNotLoad("the key file is truncated or oversized")
            }
            target.copyBytes(from: bytes.prefix(size))
            bytes = bytes.dropFirst(size)
            return size
        }
        blob.srk_name_size = try withUnsafeMutableBytes(of: &blob.srk_name) { try field($0.count, into: $0) }
        blob.public_size = try withUnsafeMutableBytes(of: &blob.public_area) { try field($0.count, into: $0) }
        blob.private_size = try withUnsafeMutableBytes(of: &blob.private_area) { try field($0.count, into: $0) }
        guard bytes.isEmpty else { throw TPMFailure.keyDoesNotLoad("the key file has trailing bytes") }
        return blob
    }

    public func createPendingKey() throws -> (key: any DeviceKey, reference: String) {
        var blob = xign_tpm_blob()
        var point = [UInt8](repeating: 0, count: 65)
        try Self.withTPM(tcti) { tpm in
            let rc = xign_tpm_create_key(tpm, &blob, &point)
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        let reference = try files.writePending(Self.encode(blob))
        return (TPMDeviceKey(tcti: tcti, blob: blob, point: Data(point)), reference)
    }

    public func commit(pending: String, as reference: String) throws {
        try files.commit(pending: pending, as: reference)
    }

    public func load(_ reference: String) throws -> any DeviceKey {
        let blob = try Self.decode(try files.read(reference))
        var point = [UInt8](repeating: 0, count: 65)
        var copy = blob
        guard xign_tpm_blob_point(&copy, &point) == 0 else {
            throw TPMFailure.keyDoesNotLoad("the public part does not parse")
        }
        return TPMDeviceKey(tcti: tcti, blob: blob, point: Data(point))
    }

    public func delete(_ reference: String) throws { try files.delete(reference) }
}
