import COpenSSL
import FoundationEssentials

/// A PIN sealed to the manager's pinned key, so that nobody between the device and the manager (a TLS proxy, a
/// certificate issued to the wrong party) can read it.
///
/// ECDH on P-256 with a fresh ephemeral key, HKDF-SHA256 over the shared secret (salted with both public keys), and
/// AES-256-GCM with the request's binding (its challenge, grant or activation) as associated data. The PIN is
/// padded to `paddedLength`, so the ciphertext does not tell its length either. The key and nonce are fresh per
/// seal, so the nonce comes from HKDF too.
public enum PINSeal {
    /// The longest PIN any policy allows, in UTF-8 bytes; every sealed PIN is this long.
    public static let paddedLength = 64
    static let tagLength = 16
    static let pointLength = 65
    private static var info: Data { Data("xign pin seal v1".utf8) }

    /// The ephemeral public point (uncompressed, 65 bytes) and the ciphertext with its tag.
    public struct Sealed: Sendable, Equatable {
        public let ephemeralPoint: Data
        public let ciphertext: Data

        public init(ephemeralPoint: Data, ciphertext: Data) {
            self.ephemeralPoint = ephemeralPoint
            self.ciphertext = ciphertext
        }
    }

    /// `ephemeral` is for the shared test vectors only; a seal always draws a fresh key.
    public static func seal(
        _ pin: String, to recipient: P256PublicKey, binding: Data, ephemeral: P256PrivateKey? = nil
    ) throws -> Sealed {
        let bytes = Data(pin.utf8)
        guard !bytes.isEmpty, bytes.count <= paddedLength, !bytes.contains(0) else {
            throw CryptoError("a PIN to seal has 1 to 64 bytes and no NUL")
        }
        let ephemeral = try ephemeral ?? P256PrivateKey()
        let point = ephemeral.publicKey.point
        let (key, nonce) = keyAndNonce(
            secret: try ephemeral.sharedSecret(with: recipient), ephemeralPoint: point, recipient: recipient)
        let padded = bytes + Data(repeating: 0, count: paddedLength - bytes.count)
        return Sealed(
            ephemeralPoint: point, ciphertext: try AESGCM.seal(padded, key: key, nonce: nonce, associatedData: binding))
    }

    /// The PIN, or an error when the seal was not made for `key` and `binding` or was changed on the way.
    public static func open(_ sealed: Sealed, with key: P256PrivateKey, binding: Data) throws -> String {
        guard sealed.ephemeralPoint.count == pointLength, sealed.ciphertext.count == paddedLength + tagLength else {
            throw CryptoError("a sealed PIN has the wrong length")
        }
        let ephemeral = try P256PublicKey(x963Representation: sealed.ephemeralPoint)
        let recipient = key.publicKey
        let (aesKey, nonce) = keyAndNonce(
            secret: try key.sharedSecret(with: ephemeral), ephemeralPoint: sealed.ephemeralPoint, recipient: recipient)
        let padded = try AESGCM.open(sealed.ciphertext, key: aesKey, nonce: nonce, associatedData: binding)
        let pin = padded.prefix { $0 != 0 }
        guard !pin.isEmpty, padded.dropFirst(pin.count).allSatisfy({ $0 == 0 }),
            let text = String(validating: pin, as: UTF8.self)
        else {
            throw CryptoError("a sealed PIN holds no PIN")
        }
        return text
    }

    private static func keyAndNonce(secret: Data, ephemeralPoint: Data, recipient: P256PublicKey) -> (Data, Data) {
        let material = HKDF.derive(
            secret: secret, salt: ephemeralPoint + recipient.derRepresentation, info: info, length: 44)
        return (material.prefix(32), material.suffix(12))
    }
}

/// HKDF-SHA256 (RFC 5869) on OpenSSL's HMAC.
public enum HKDF {
    public static func derive(secret: Data, salt: Data, info: Data, length: Int) -> Data {
        precondition(length <= 255 * 32)
        let pseudorandomKey = HMACSHA256.authenticationCode(for: secret, key: salt)
        var output = Data()
        var block = Data()
        var counter: UInt8 = 1
        while output.count < length {
            block = HMACSHA256.authenticationCode(for: block + info + Data([counter]), key: pseudorandomKey)
            output += block
            counter += 1
        }
        return output.prefix(length)
    }
}

/// AES-256-GCM with a 12-byte nonce; the 16-byte tag follows the ciphertext.
enum AESGCM {
    static func seal(_ plaintext: Data, key: Data, nonce: Data, associatedData: Data) throws -> Data {
        try run(encrypting: true, plaintext, key: key, nonce: nonce, associatedData: associatedData)
    }

    static func open(_ sealed: Data, key: Data, nonce: Data, associatedData: Data) throws -> Data {
        guard sealed.count >= PINSeal.tagLength else { throw CryptoError("AES-GCM input is shorter than its tag") }
        return try run(encrypting: false, sealed, key: key, nonce: nonce, associatedData: associatedData)
    }

    private static func run(
        encrypting: Bool, _ input: Data, key: Data, nonce: Data, associatedData: Data
    ) throws -> Data {
        guard key.count == 32, nonce.count == 12 else { throw CryptoError("AES-GCM key or nonce length") }
        guard let context = EVP_CIPHER_CTX_new() else { throw CryptoError("EVP_CIPHER_CTX_new") }
        defer { EVP_CIPHER_CTX_free(context) }
        let body = encrypting ? input : input.dropLast(PINSeal.tagLength)
        var tag = [UInt8](encrypting ? Data(count: PINSeal.tagLength) : input.suffix(PINSeal.tagLength))
        var output = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0
        let keyBytes = [UInt8](key)
        let nonceBytes = [UInt8](nonce)
        let aad = [UInt8](associatedData)
        let bodyBytes = [UInt8](body)
        let initialize = encrypting ? EVP_EncryptInit_ex : EVP_DecryptInit_ex
        let update = encrypting ? EVP_EncryptUpdate : EVP_DecryptUpdate
        guard initialize(context, EVP_aes_256_gcm(), nil, nil, nil) == 1,
            EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_IVLEN, 12, nil) == 1,
            initialize(context, nil, nil, keyBytes, nonceBytes) == 1,
            update(context, nil, &length, aad, Int32(aad.count)) == 1,
            update(context, &output, &length, bodyBytes, Int32(bodyBytes.count)) == 1
        else { throw CryptoError("AES-GCM setup") }
        let written = Int(length)
        if encrypting {
            guard EVP_EncryptFinal_ex(context, &output[written], &length) == 1,
                EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, Int32(PINSeal.tagLength), &tag) == 1
            else { throw CryptoError("AES-GCM seal") }
            return Data(output.prefix(written)) + Data(tag)
        }
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, Int32(PINSeal.tagLength), &tag) == 1,
            EVP_DecryptFinal_ex(context, &output[written], &length) == 1
        else {
            ERR_clear_error()
            throw CryptoError("the sealed data does not open: wrong key, wrong binding, or changed on the way")
        }
        return Data(output.prefix(written))
    }
}
