import COpenSSL
import FoundationEssentials

/// The certificate a TPM's maker stored in the TPM for its endorsement key (EK): who issued it, which key it
/// certifies, and whether it chains to a CA an administrator trusts.
public struct EndorsementCertificate: Sendable {
    /// The kinds of EK a certificate can be for, as the TCG EK templates make them.
    public enum KeyKind: String, Sendable, Codable, CaseIterable {
        case rsa2048, p256, p384

        /// The EK's name algorithm decides the seed's size and the KDF's hash; its symmetric key, the credential's.
        var digest: Digest { self == .p384 ? .sha384 : .sha256 }
        var symmetricKeyBits: Int { self == .p384 ? 256 : 128 }
    }

    public let der: Data
    /// The issuer's distinguished name (RFC 2253).
    public let issuer: String
    public let keyKind: KeyKind
    /// RSA: the modulus; ECC: the uncompressed point 0x04 || X || Y.
    let publicKey: Data
    /// The TPM manufacturer its subject alternative name names, as the TCG writes it ("id:49465800"); nil for none.
    public let manufacturer: String?
    /// Why it is not an EK certificate by the TCG EK credential profile, whoever issued it; nil when it is one.
    public let profileRefusal: String?

    public static let maximumSize = 4096

    public init(der: Data) throws {
        guard (1...Self.maximumSize).contains(der.count) else {
            throw AttestationError("the EK certificate is empty or larger than 4 KiB")
        }
        let certificate = try Self.parse(der)
        defer { X509_free(certificate) }
        self.der = der
        issuer = Self.text(of: X509_get_issuer_name(certificate))
        guard let key = X509_get0_pubkey(certificate) else {
            throw AttestationError("the EK certificate has no usable public key")
        }
        (keyKind, publicKey) = try Self.endorsementKey(key)
        var text = [CChar](repeating: 0, count: 65)
        let length = xign_x509_tpm_manufacturer(certificate, &text, text.count)
        manufacturer =
            length > 0 ? String(decoding: text.prefix(Int(length)).map { UInt8(bitPattern: $0) }, as: UTF8.self) : nil
        profileRefusal = Self.profileRefusal(
            certificate, kind: keyKind, publicKey: publicKey, manufacturer: manufacturer)
        ERR_clear_error()
    }

    /// The TCG EK credential profile's marks, which a certificate for any other key lacks: not a CA, the key usage of
    /// a restricted decryption key, the EK purpose and no TLS one, and a TPM manufacturer named. An RSA key with the
    /// ROCA fingerprint is refused too: its private key can be computed.
    private static func profileRefusal(
        _ certificate: OpaquePointer, kind: KeyKind, publicKey: Data, manufacturer: String?
    ) -> String? {
        let flags = X509_get_extension_flags(certificate)
        if flags & UInt32(EXFLAG_INVALID) != 0 { return "its extensions cannot be read" }
        if flags & UInt32(EXFLAG_CA) != 0 { return "it is a CA certificate (CA:TRUE)" }
        let usage = X509_get_key_usage(certificate)
        let needed =
            kind == .rsa2048
            ? ("keyEncipherment", UInt32(KU_KEY_ENCIPHERMENT)) : ("keyAgreement", UInt32(KU_KEY_AGREEMENT))
        guard usage != UInt32.max, usage & needed.1 != 0 else {
            return "its key usage lacks \(needed.0), which an EK's key has"
        }
        let signing = UInt32(KU_DIGITAL_SIGNATURE | KU_NON_REPUDIATION | KU_KEY_CERT_SIGN | KU_CRL_SIGN)
        if usage & signing != 0 {
            return "its key usage allows signing, which an EK (a restricted decryption key) never does"
        }
        if xign_x509_eku_lists(certificate, "2.23.133.8.1") == 0 {
            return "its extended key usage lacks the EK certificate purpose (2.23.133.8.1)"
        }
        if xign_x509_eku_lists(certificate, "1.3.6.1.5.5.7.3.1") == 1
            || xign_x509_eku_lists(certificate, "1.3.6.1.5.5.7.3.2") == 1
        {
            return "its extended key usage names TLS (serverAuth or clientAuth)"
        }
        guard manufacturer != nil else {
            return "its subject alternative name names no TPM manufacturer (2.23.133.2.1)"
        }
        if kind == .rsa2048 && ROCAFingerprint.matches(publicKey) {
            return
                "its RSA key has the ROCA fingerprint (CVE-2017-15361), so its private key can be computed; the TPM needs a firmware update"
        }
        return nil
    }

    static func parse(_ der: Data) throws -> OpaquePointer {
        let parsed = der.withUnsafeBytes { raw -> OpaquePointer? in
            var pointer = raw.bindMemory(to: UInt8.self).baseAddress
            let certificate = d2i_X509(nil, &pointer, raw.count)
            // The whole input, not a certificate followed by anything.
            if let certificate, pointer != raw.bindMemory(to: UInt8.self).baseAddress.map({ $0 + raw.count }) {
                X509_free(certificate)
                return nil
            }
            return certificate
        }
        ERR_clear_error()
        guard let parsed else { throw AttestationError("the EK certificate is not a DER X.509 certificate") }
        return parsed
    }

    static func text(of name: OpaquePointer?) -> String {
        guard let name, let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        X509_NAME_print_ex(bio, name, 0, xign_name_format_rfc2253)
        var bytes = [UInt8](repeating: 0, count: 512)
        let count = BIO_read(bio, &bytes, Int32(bytes.count))
        return String(decoding: bytes.prefix(max(0, Int(count))), as: UTF8.self)
    }

    private static func endorsementKey(_ key: OpaquePointer) throws -> (KeyKind, Data) {
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA:
            guard EVP_PKEY_get_bits(key) == 2048 else {
                throw AttestationError("the EK certificate's RSA key is not 2048 bits")
            }
            var modulus: OpaquePointer? = nil
            guard EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &modulus) == 1, let modulus else {
                throw AttestationError("the EK certificate's RSA key has no modulus")
            }
            defer { BN_free(modulus) }
            var bytes = [UInt8](repeating: 0, count: 256)
            guard BN_bn2binpad(modulus, &bytes, 256) == 256 else {
                throw AttestationError("the EK certificate's RSA modulus is not 2048 bits")
            }
            return (.rsa2048, Data(bytes))
        case EVP_PKEY_EC:
            var name = [CChar](repeating: 0, count: 64)
            var length = 0
            var point = [UInt8](repeating: 0, count: 133)
            var pointLength = 0
            guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1,
                EVP_PKEY_get_octet_string_param(key, OSSL_PKEY_PARAM_PUB_KEY, &point, point.count, &pointLength) == 1
            else { throw AttestationError("the EK certificate's EC key is unreadable") }
            let group = String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let kind: KeyKind
            switch group {
            case "prime256v1", "P-256": kind = .p256
            case "secp384r1", "P-384": kind = .p384
            default: throw AttestationError("the EK certificate's curve \(group.prefix(32)) is not P-256 or P-384")
            }
            guard pointLength == 1 + 2 * kind.coordinateSize, point[0] == 0x04 else {
                throw AttestationError("the EK certificate's point is not uncompressed")
            }
            return (kind, Data(point.prefix(pointLength)))
        default:
            throw AttestationError("the EK certificate's key is neither RSA nor EC")
        }
    }
}

extension EndorsementCertificate.KeyKind {
    var coordinateSize: Int { self == .p384 ? 48 : 32 }
    var groupName: String { self == .p384 ? "secp384r1" : "prime256v1" }
}
