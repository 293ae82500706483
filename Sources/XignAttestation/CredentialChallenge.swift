import COpenSSL
import FoundationEssentials
import XignCrypto

/// TPM2_MakeCredential done by the verifier (TPM 2.0 Part 1, 24 "Credential Protection"): `secret` sealed so that
/// only the TPM holding the EK of `certificate` releases it, and only to an object named `objectName` loaded beside
/// it. The marshalled TPM2B_ID_OBJECT and TPM2B_ENCRYPTED_SECRET are what TPM2_ActivateCredential takes.
public struct CredentialChallenge: Sendable {
    public let credentialBlob: Data
    public let encryptedSecret: Data

    public init(secret: Data, for certificate: EndorsementCertificate, objectName: Data) throws {
        guard (1...32).contains(secret.count) else { throw AttestationError("a credential's secret is 1 to 32 bytes") }
        let kind = certificate.keyKind
        let digest = kind.digest
        let seed: Data
        let sealedSeed: Data
        switch kind {
        case .rsa2048:
            seed = try SecureRandom.bytes(digest.size)
            sealedSeed = try Self.oaepEncrypt(seed, modulus: certificate.publicKey)
        case .p256, .p384:
            let (sharedX, ephemeral) = try Self.ephemeralAgreement(with: certificate.publicKey, kind: kind)
            let size = kind.coordinateSize
            let ephemeralX = ephemeral.dropFirst().prefix(size), ephemeralY = ephemeral.suffix(size)
            seed = KDF.e(
                digest, secret: sharedX, label: "IDENTITY", partyU: Data(ephemeralX),
                partyV: Data(certificate.publicKey.dropFirst().prefix(size)),
                bits: digest.size * 8)
            var point = TPMWriter()
            point.sized(Data(ephemeralX))
            point.sized(Data(ephemeralY))
            sealedSeed = point.data
        }
        let symmetricKey = KDF.a(
            digest, key: seed, label: "STORAGE", contextU: objectName, contextV: Data(), bits: kind.symmetricKeyBits)
        let encryptedIdentity = try Self.cfbEncrypt(TPMWriter.sized(secret), key: symmetricKey)
        let integrityKey = KDF.a(
            digest, key: seed, label: "INTEGRITY", contextU: Data(), contextV: Data(), bits: digest.size * 8)
        let integrity = digest.hmac(encryptedIdentity + objectName, key: integrityKey)
        credentialBlob = TPMWriter.sized(TPMWriter.sized(integrity) + encryptedIdentity)
        encryptedSecret = TPMWriter.sized(sealedSeed)
    }

    /// RSA-OAEP with SHA-256 and the label "IDENTITY" (its terminating zero included), to the EK's modulus.
    private static func oaepEncrypt(_ seed: Data, modulus: Data) throws -> Data {
        let imported = modulus.withUnsafeBytes {
            xign_rsa_public_key($0.bindMemory(to: UInt8.self).baseAddress, $0.count)
        }
        ERR_clear_error()
        guard let key = imported else { throw AttestationError("the EK's RSA key does not import") }
        defer { EVP_PKEY_free(key) }
        guard let context = EVP_PKEY_CTX_new(key, nil) else { throw AttestationError("out of memory") }
        defer { EVP_PKEY_CTX_free(context) }
        let label = Array("IDENTITY\0".utf8)
        guard let ownedLabel = CRYPTO_malloc(label.count, nil, 0) else { throw AttestationError("out of memory") }
        ownedLabel.copyMemory(from: label, byteCount: label.count)
        guard EVP_PKEY_encrypt_init(context) == 1, EVP_PKEY_CTX_set_rsa_padding(context, RSA_PKCS1_OAEP_PADDING) == 1,
            EVP_PKEY_CTX_set_rsa_oaep_md(context, EVP_sha256()) == 1,
            EVP_PKEY_CTX_set_rsa_mgf1_md(context, EVP_sha256()) == 1,
            EVP_PKEY_CTX_set0_rsa_oaep_label(context, ownedLabel, Int32(label.count)) == 1
        else {
            CRYPTO_free(ownedLabel, nil, 0)
            ERR_clear_error()
            throw AttestationError("RSA-OAEP is not available")
        }
        var out = [UInt8](repeating: 0, count: 256)
        var length = out.count
        let encrypted = seed.withUnsafeBytes {
            EVP_PKEY_encrypt(context, &out, &length, $0.bindMemory(to: UInt8.self).baseAddress, $0.count)
        }
        ERR_clear_error()
        guard encrypted == 1 else { throw AttestationError("the seed could not be encrypted to the EK") }
        return Data(out.prefix(length))
    }

    /// ECDH of a new key on the EK's curve with the EK: the shared X coordinate and the new key's uncompressed point.
    private static func ephemeralAgreement(
        with point: Data, kind: EndorsementCertificate.KeyKind
    ) throws -> (Data, Data) {
        let group = kind.groupName
        let imported = point.withUnsafeBytes {
            xign_ec_public_key(group, $0.bindMemory(to: UInt8.self).baseAddress, $0.count)
        }
        ERR_clear_error()
        guard let peer = imported else { throw AttestationError("the EK's point is not on its curve") }
        defer { EVP_PKEY_free(peer) }
        guard let ephemeral = group.withCString({ xign_ec_generate($0) }) else {
            ERR_clear_error()
            throw AttestationError("no key could be made on the EK's curve")
        }
        defer { EVP_PKEY_free(ephemeral) }
        guard let context = EVP_PKEY_CTX_new(ephemeral, nil) else { throw AttestationError("out of memory") }
        defer { EVP_PKEY_CTX_free(context) }
        var shared = [UInt8](repeating: 0, count: 66)
        var sharedLength = shared.count
        var ephemeralPoint = [UInt8](repeating: 0, count: 133)
        var pointLength = 0
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer) == 1,
            EVP_PKEY_derive(context, &shared, &sharedLength) == 1,
            EVP_PKEY_get_octet_string_param(
                ephemeral, OSSL_PKEY_PARAM_PUB_KEY, &ephemeralPoint, ephemeralPoint.count, &pointLength) == 1,
            sharedLength == kind.coordinateSize, pointLength == 1 + 2 * kind.coordinateSize
        else {
            ERR_clear_error()
            throw AttestationError("the key agreement with the EK failed")
        }
        return (Data(shared.prefix(sharedLength)), Data(ephemeralPoint.prefix(pointLength)))
    }

    /// AES-CFB with a zero IV, as credential protection uses it (a fresh key each time).
    private static func cfbEncrypt(_ plaintext: Data, key: Data) throws -> Data {
        guard let context = EVP_CIPHER_CTX_new() else { throw AttestationError("out of memory") }
        defer { EVP_CIPHER_CTX_free(context) }
        let cipher = key.count == 32 ? EVP_aes_256_cfb128() : EVP_aes_128_cfb128()
        let iv = [UInt8](repeating: 0, count: 16)
        var out = [UInt8](repeating: 0, count: plaintext.count + 16)
        var length: Int32 = 0
        var tail: Int32 = 0
        let done = key.withUnsafeBytes { k in
            plaintext.withUnsafeBytes { p in
                EVP_EncryptInit_ex(context, cipher, nil, k.bindMemory(to: UInt8.self).baseAddress, iv) == 1
                    && EVP_EncryptUpdate(
                        context, &out, &length, p.bindMemory(to: UInt8.self).baseAddress, Int32(p.count)) == 1
                    && EVP_EncryptFinal_ex(
                        context, UnsafeMutablePointer(mutating: out).advanced(by: Int(length)), &tail) == 1
            }
        }
        guard done else {
            ERR_clear_error()
            throw AttestationError("AES-CFB failed")
        }
        return Data(out.prefix(Int(length + tail)))
    }
}

/// The hashes of the EK name algorithms.
enum Digest {
    case sha256, sha384

    var size: Int { self == .sha384 ? 48 : 32 }
    private var md: OpaquePointer? { self == .sha384 ? EVP_sha384() : EVP_sha256() }

    func hash(_ data: Data) -> Data {
        var out = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        data.withUnsafeBytes { _ = EVP_Digest($0.baseAddress, $0.count, &out, &length, md, nil) }
        return Data(out.prefix(Int(length)))
    }

    func hmac(_ data: Data, key: Data) -> Data {
        var out = [UInt8](repeating: 0, count: 64)
        var length: UInt32 = 0
        key.withUnsafeBytes { k in
            data.withUnsafeBytes { d in
                _ = HMAC(
                    md, k.baseAddress, Int32(k.count), d.bindMemory(to: UInt8.self).baseAddress, d.count, &out, &length)
            }
        }
        return Data(out.prefix(Int(length)))
    }
}

/// The TPM's key derivation functions (Part 1, 11.4.10).
enum KDF {
    /// KDFa: HMAC in counter mode over counter || label || 0 || contextU || contextV || bits.
    static func a(_ digest: Digest, key: Data, label: String, contextU: Data, contextV: Data, bits: Int) -> Data {
        derive(bits) { counter in
            digest.hmac(bigEndian(counter) + Data(label.utf8) + [0] + contextU + contextV + bigEndian(bits), key: key)
        }
    }

    /// KDFe: a hash in counter mode over counter || Z || label || 0 || partyU || partyV.
    static func e(_ digest: Digest, secret: Data, label: String, partyU: Data, partyV: Data, bits: Int) -> Data {
        derive(bits) { counter in digest.hash(bigEndian(counter) + secret + Data(label.utf8) + [0] + partyU + partyV) }
    }

    private static func derive(_ bits: Int, block: (Int) -> Data) -> Data {
        var out = Data()
        var counter = 1
        while out.count * 8 < bits {
            out += block(counter)
            counter += 1
        }
        return out.prefix(bits / 8)
    }

    private static func bigEndian(_ value: Int) -> Data {
        Data([UInt8(value >> 24 & 0xFF), UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)])
    }
}
