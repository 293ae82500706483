import COpenSSL
import FoundationEssentials

/// An error from the crypto layer. The message names the operation; OpenSSL's own queue is added when present.
public struct CryptoError: Error, Equatable, CustomStringConvertible {
    public let description: String

    init(_ operation: String) {
        var text = operation
        let code = ERR_get_error()
        if code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            text += " (\(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)))"
        }
        ERR_clear_error()
        description = text
    }
}

/// A P-256 public key in SubjectPublicKeyInfo DER form, checked to be on the curve, and parsed once: each
/// verification uses the key imported at init from its point (an import costs a quarter of a verification).
///
/// Only the one canonical encoding is accepted (id-ecPublicKey, prime256v1, an uncompressed point, nothing after
/// it), so one key has one fingerprint.
public struct P256PublicKey: Sendable, Hashable {
    /// The DER SubjectPublicKeyInfo, the form the key travels in.
    public let derRepresentation: Data
    private let parsed: EVPKey

    /// The DER that precedes the 65-byte point in every key we accept. An array, not Data: Data's enum keeps the
    /// pointer with spare bits set, and LeakSanitizer (the fuzz targets) would take the global for a leak.
    private static let prefix: [UInt8] = [
        0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01,
        0x06, 0x08, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
    ]

    public init(derRepresentation: Data) throws {
        guard derRepresentation.count == Self.prefix.count + 65, derRepresentation.starts(with: Self.prefix),
            derRepresentation[derRepresentation.startIndex + Self.prefix.count] == 0x04
        else {
            throw CryptoError(
                "public key is not a P-256 SubjectPublicKeyInfo with an uncompressed point and nothing after it")
        }
        parsed = try Self.load(derRepresentation)
        self.derRepresentation = Data(derRepresentation)
    }

    public static func == (left: P256PublicKey, right: P256PublicKey) -> Bool {
        left.derRepresentation == right.derRepresentation
    }

    public func hash(into hasher: inout Hasher) { hasher.combine(derRepresentation) }

    /// The parsed key, lent for the length of `body`.
    func withKey<T>(_ body: (OpaquePointer) throws -> T) rethrows -> T { try parsed.withPointer(body) }

    /// The uncompressed point (0x04 || X || Y), for callers that build the key from raw coordinates.
    public init(x963Representation point: Data) throws {
        guard point.count == 65, point.first == 0x04 else {
            throw CryptoError("P-256 point must be 65 bytes, uncompressed")
        }
        try self.init(derRepresentation: Data(Self.prefix) + point)
    }

    /// The uncompressed point (0x04 || X || Y).
    public var point: Data { derRepresentation.suffix(65) }

    /// base64url(SHA-256(SPKI)): the fingerprint the activation data carries to pin the manager key.
    public var fingerprint: String { Base64URL.encode(SHA256.hash(derRepresentation)) }

    /// The first 128 bits of the fingerprint in base32, for payloads that must fit a small QR code; a second key
    /// with the same short fingerprint still costs 2^128 work.
    public var shortFingerprint: String { Base32.encode(SHA256.hash(derRepresentation).prefix(16)) }

    /// Checks a raw (r || s, 64 bytes) ECDSA-SHA256 signature over `message`.
    public func isValidSignature(_ signature: Data, for message: Data) -> Bool {
        guard signature.count == 64, let der = ECDSASignature.der(fromRaw: signature), let context = EVP_MD_CTX_new()
        else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard withKey({ EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, $0) }) == 1 else { return false }
        let result = der.withUnsafeBytes { sig in
            message.withUnsafeBytes { msg in
                EVP_DigestVerify(
                    context,
                    sig.bindMemory(to: UInt8.self).baseAddress, sig.count,
                    msg.bindMemory(to: UInt8.self).baseAddress, msg.count
                )
            }
        }
        ERR_clear_error()
        return result == 1
    }

    /// Imports the point of a DER the init has checked byte by byte, so only the point is left to judge.
    static func load(_ der: Data) throws -> EVPKey {
        let point = der.suffix(65)
        let key = point.withUnsafeBytes { xign_p256_public_key($0.bindMemory(to: UInt8.self).baseAddress, $0.count) }
        ERR_clear_error()
        guard let key else { throw CryptoError("public key is not a point on P-256") }
        let owned = EVPKey(taking: key)
        guard owned.withPointer(isP256) else { throw CryptoError("public key is not on P-256") }
        return owned
    }

    static func isP256(_ key: OpaquePointer) -> Bool {
        guard EVP_PKEY_get_base_id(key) == EVP_PKEY_EC else { return false }
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return false }
        let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return group == "prime256v1" || group == "P-256"
    }
}

/// A P-256 private key held in OpenSSL memory. The software device key and the manager's signing key.
public final class P256PrivateKey: Sendable {
    private let key: EVPKey
    /// Derived once: the manager opens every sealed PIN with it, and a derivation costs more than the ECDH.
    public let publicKey: P256PublicKey

    /// Generates a fresh key from the system's CSPRNG.
    public init() throws {
        guard let context = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            throw CryptoError("EVP_PKEY_CTX_new_from_name")
        }
        defer { EVP_PKEY_CTX_free(context) }
        guard EVP_PKEY_keygen_init(context) == 1,
            EVP_PKEY_CTX_set_group_name(context, "P-256") == 1
        else { throw CryptoError("P-256 key generation setup") }
        var generated: OpaquePointer?
        guard EVP_PKEY_generate(context, &generated) == 1, let generated else {
            throw CryptoError("P-256 key generation")
        }
        key = EVPKey(taking: generated)
        publicKey = try Self.publicKey(of: key)
    }

    /// Reads a PKCS#8 PEM private key.
    public init(pemRepresentation pem: String) throws {
        guard pem.utf8.count <= 4096 else { throw CryptoError("private key file is too large") }
        let bytes = Array(pem.utf8)
        let loaded: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
        }
        guard let loaded else { throw CryptoError("private key is not a PEM PKCS#8 key") }
        key = EVPKey(taking: loaded)
        guard key.withPointer(P256PublicKey.isP256) else { throw CryptoError("private key is not on P-256") }
        publicKey = try Self.publicKey(of: key)
    }

    /// PKCS#8 PEM, unencrypted. Callers store it 0600.
    public func pemRepresentation() throws -> String {
        guard let bio = BIO_new(BIO_s_mem()) else { throw CryptoError("BIO_new") }
        defer { BIO_free(bio) }
        guard key.withPointer({ PEM_write_bio_PrivateKey(bio, $0, nil, nil, 0, nil, nil) }) == 1 else {
            throw CryptoError("PEM_write_bio_PrivateKey")
        }
        return String(decoding: Self.drain(bio), as: UTF8.self)
    }

    private static func publicKey(of key: EVPKey) throws -> P256PublicKey {
        var out: UnsafeMutablePointer<UInt8>?
        let length = key.withPointer { i2d_PUBKEY($0, &out) }
        guard length > 0, let out else { throw CryptoError("i2d_PUBKEY") }
        defer { CRYPTO_free(out, #fileID, #line) }
        return try P256PublicKey(derRepresentation: Data(bytes: out, count: Int(length)))
    }

    /// The ECDH shared secret (the x coordinate, 32 bytes) with `peer`.
    public func sharedSecret(with peer: P256PublicKey) throws -> Data {
        guard let context = key.withPointer({ EVP_PKEY_CTX_new($0, nil) }) else {
            throw CryptoError("EVP_PKEY_CTX_new")
        }
        defer { EVP_PKEY_CTX_free(context) }
        var secret = [UInt8](repeating: 0, count: 32)
        var length = secret.count
        guard EVP_PKEY_derive_init(context) == 1, peer.withKey({ EVP_PKEY_derive_set_peer(context, $0) }) == 1,
            EVP_PKEY_derive(context, &secret, &length) == 1, length == 32
        else { throw CryptoError("ECDH") }
        return Data(secret)
    }

    /// ECDSA-SHA256 over `message`, returned as raw r || s (64 bytes).
    public func signature(for message: Data) throws -> Data {
        guard let context = EVP_MD_CTX_new() else { throw CryptoError("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(context) }
        guard key.withPointer({ EVP_DigestSignInit(context, nil, EVP_sha256(), nil, $0) }) == 1 else {
            throw CryptoError("EVP_DigestSignInit")
        }
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        let result = message.withUnsafeBytes { msg in
            EVP_DigestSign(context, &der, &length, msg.bindMemory(to: UInt8.self).baseAddress, msg.count)
        }
        guard result == 1, let raw = ECDSASignature.raw(fromDER: Data(der.prefix(length))) else {
            throw CryptoError("EVP_DigestSign")
        }
        return raw
    }

    private static func drain(_ bio: OpaquePointer) -> [UInt8] {
        var result: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 1024)
        while true {
            let n = BIO_read(bio, &chunk, Int32(chunk.count))
            if n <= 0 { break }
            result += chunk.prefix(Int(n))
        }
        return result
    }
}

/// Conversions between DER ECDSA signatures (OpenSSL, TPM tools) and raw r || s (JWS, our wire format).
public enum ECDSASignature {
    public static func raw(fromDER der: Data) -> Data? {
        let signature: OpaquePointer? = der.withUnsafeBytes { raw in
            var cursor = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, raw.count)
        }
        guard let signature else { return nil }
        defer { ECDSA_SIG_free(signature) }
        var out = [UInt8](repeating: 0, count: 64)
        guard let r = ECDSA_SIG_get0_r(signature), let s = ECDSA_SIG_get0_s(signature),
            BN_bn2binpad(r, &out, 32) == 32,
            out.withUnsafeMutableBufferPointer({ BN_bn2binpad(s, $0.baseAddress! + 32, 32) }) == 32
        else { return nil }
        return Data(out)
    }

    public static func der(fromRaw raw: Data) -> Data? {
        guard raw.count == 64, let signature = ECDSA_SIG_new() else { return nil }
        defer { ECDSA_SIG_free(signature) }
        let bytes = [UInt8](raw)
        guard let r = BN_bin2bn(bytes, 32, nil) else { return nil }
        guard let s = bytes.withUnsafeBufferPointer({ BN_bin2bn($0.baseAddress! + 32, 32, nil) }) else {
            BN_free(r)
            return nil
        }
        guard ECDSA_SIG_set0(signature, r, s) == 1 else {
            BN_free(r)
            BN_free(s)
            return nil
        }
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(signature, &out)
        guard length > 0, let out else { return nil }
        defer { CRYPTO_free(out, #fileID, #line) }
        return Data(bytes: out, count: Int(length))
    }
}
