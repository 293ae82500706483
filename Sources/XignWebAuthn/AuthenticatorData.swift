import FoundationEssentials
import XignCrypto

/// The authenticator data (WebAuthn §6.1): the RP id hash, the flags, the signature counter, and at registration
/// the attested credential (its id and COSE key).
public struct AuthenticatorData: Sendable {
    public struct Flags: OptionSet, Sendable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let userPresent = Flags(rawValue: 0x01)
        public static let userVerified = Flags(rawValue: 0x04)
        /// The credential may be copied to other devices (a synced passkey).
        public static let backupEligible = Flags(rawValue: 0x08)
        /// The credential is copied already.
        public static let backedUp = Flags(rawValue: 0x10)
        public static let attestedCredential = Flags(rawValue: 0x40)
        public static let extensions = Flags(rawValue: 0x80)
    }

    public struct AttestedCredential: Sendable {
        public let aaguid: Data
        public let id: Data
        public let publicKey: P256PublicKey
    }

    /// Credential ids are at most 1023 bytes (WebAuthn §5.8.3).
    public static let maximumCredentialIdLength = 1023
    /// Authenticator data with a key and some extensions is a few hundred bytes; this is plenty.
    public static let maximumLength = 2048

    public let rpIdHash: Data
    public let flags: Flags
    public let signCount: UInt32
    public let attestedCredential: AttestedCredential?
    /// The bytes as signed.
    public let raw: Data

    public init(_ data: Data) throws(WebAuthnError) {
        guard data.count <= Self.maximumLength else { throw .malformed("the authenticator data is too long") }
        let bytes = [UInt8](data)
        guard bytes.count >= 37 else { throw .malformed("the authenticator data is shorter than 37 bytes") }
        raw = data
        rpIdHash = Data(bytes[0..<32])
        flags = Flags(rawValue: bytes[32])
        signCount = bytes[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        var offset = 37
        if flags.contains(.attestedCredential) {
            guard bytes.count >= offset + 18 else { throw .malformed("the attested credential data is cut short") }
            let aaguid = Data(bytes[offset..<offset + 16])
            let idLength = Int(bytes[offset + 16]) << 8 | Int(bytes[offset + 17])
            offset += 18
            guard idLength > 0, idLength <= Self.maximumCredentialIdLength, bytes.count >= offset + idLength else {
                throw .malformed("the credential id is empty, too long or cut short")
            }
            let id = Data(bytes[offset..<offset + idLength])
            offset += idLength
            var reader = CBORReader(Data(bytes[offset...]))
            let key = try COSEKey.publicKey(from: try reader.read())
            offset += reader.offset
            attestedCredential = AttestedCredential(aaguid: aaguid, id: id, publicKey: key)
        } else {
            attestedCredential = nil
        }
        if flags.contains(.extensions) {
            var reader = CBORReader(Data(bytes[offset...]))
            guard case .map = try reader.read() else {
                throw .malformed("the authenticator extensions are not a CBOR map")
            }
            offset += reader.offset
        }
        guard offset == bytes.count else { throw .malformed("the authenticator data has bytes after its last part") }
    }
}

/// COSE_Key (RFC 9053) as passkeys give it: EC2 on P-256 for ES256, the only kind we ask for.
enum COSEKey {
    static func publicKey(from value: CBORValue) throws(WebAuthnError) -> P256PublicKey {
        guard case .map = value else { throw .malformed("the credential public key is not a COSE key map") }
        guard value[.unsigned(1)] == .unsigned(2) else {
            throw .refused("the credential key is not an EC2 key; ES256 was asked for")
        }
        guard value[.unsigned(3)] == .negative(-7) else {
            throw .refused("the credential key is not for ES256; ES256 was asked for")
        }
        guard value[.negative(-1)] == .unsigned(1) else { throw .refused("the credential key is not on P-256") }
        guard case .bytes(let x)? = value[.negative(-2)], case .bytes(let y)? = value[.negative(-3)], x.count == 32,
            y.count == 32
        else {
            throw .malformed("the credential key's coordinates are not 32 bytes each")
        }
        do { return try P256PublicKey(x963Representation: Data([0x04]) + x + y) } catch {
            throw .refused("the credential key is not a point on P-256")
        }
    }
}
