import FoundationEssentials
import XignCrypto

/// A TPM object's public area (TPMT_PUBLIC) as far as attestation needs it: what kind of key, with which
/// attributes, and its name. Only P-256 signing keys are read; nothing else is a device, host or attestation key.
public struct TPMPublicArea: Sendable, Equatable {
    /// TPMA_OBJECT bits (Part 2, 8.3).
    public struct Attributes: OptionSet, Sendable, Equatable {
        public let rawValue: UInt32
        public init(rawValue: UInt32) { self.rawValue = rawValue }
        public static let fixedTPM = Attributes(rawValue: 1 << 1)
        public static let fixedParent = Attributes(rawValue: 1 << 4)
        public static let sensitiveDataOrigin = Attributes(rawValue: 1 << 5)
        public static let userWithAuth = Attributes(rawValue: 1 << 6)
        public static let restricted = Attributes(rawValue: 1 << 16)
        public static let decrypt = Attributes(rawValue: 1 << 17)
        public static let sign = Attributes(rawValue: 1 << 18)

        /// What makes a key one that was made in a TPM and can never leave it.
        public static let boundToItsTPM: Attributes = [.fixedTPM, .fixedParent, .sensitiveDataOrigin]
    }

    /// The marshalled TPMT_PUBLIC, whose hash is the name.
    public let marshalled: Data
    public let attributes: Attributes
    /// The ECDSA P-256 key, with the scheme the key is fixed to (SHA-256) or none.
    public let publicKey: P256PublicKey

    static let algorithmECC: UInt16 = 0x0023, algorithmSHA256: UInt16 = 0x000B, algorithmNull: UInt16 = 0x0010
    static let algorithmECDSA: UInt16 = 0x0018, curveP256: UInt16 = 0x0003

    /// Parses a TPM2B_PUBLIC (a 16-bit size, then TPMT_PUBLIC), as TPM2_Create returns it.
    public init(tpm2bPublic data: Data) throws {
        guard data.count <= 1024 else { throw AttestationError("the key's public area is too large") }
        var outer = TPMReader(data, what: "the key's public area")
        let inner = try outer.sized()
        try outer.expectEnd()
        try self.init(marshalled: inner)
    }

    init(marshalled: Data) throws {
        var reader = TPMReader(marshalled, what: "the key's public area")
        guard try reader.uint16() == Self.algorithmECC else { throw AttestationError("the key is not an ECC key") }
        guard try reader.uint16() == Self.algorithmSHA256 else {
            throw AttestationError("the key's name is not SHA-256")
        }
        attributes = Attributes(rawValue: try reader.uint32())
        _ = try reader.sized()  // authPolicy
        guard try reader.uint16() == Self.algorithmNull else {
            throw AttestationError("the key has a symmetric algorithm; it is not a signing key")
        }
        let scheme = try reader.uint16()
        if scheme != Self.algorithmNull {
            guard scheme == Self.algorithmECDSA, try reader.uint16() == Self.algorithmSHA256 else {
                throw AttestationError("the key's scheme is not ECDSA with SHA-256")
            }
        }
        guard try reader.uint16() == Self.curveP256 else { throw AttestationError("the key is not on P-256") }
        guard try reader.uint16() == Self.algorithmNull else {
            throw AttestationError("the key has a KDF; it is not a signing key")
        }
        let x = try reader.sized(), y = try reader.sized()
        try reader.expectEnd()
        guard x.count <= 32, y.count <= 32 else { throw AttestationError("the key's point is not on P-256") }
        let pad = { (coordinate: Data) in Data(repeating: 0, count: 32 - coordinate.count) + coordinate }
        do {
            publicKey = try P256PublicKey(x963Representation: Data([0x04]) + pad(x) + pad(y))
        } catch {
            throw AttestationError("the key's point is not on P-256")
        }
        self.marshalled = marshalled
    }

    /// TPM2B_NAME's content: the name algorithm (SHA-256) and the hash of the public area.
    public var name: Data { Data([0x00, 0x0B]) + SHA256.hash(marshalled) }
}
