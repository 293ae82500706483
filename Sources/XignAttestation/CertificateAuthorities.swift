import COpenSSL
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The CA certificates an administrator trusts to have issued EK certificates: every certificate in the PEM and
/// DER files of one directory. Each is an anchor, an intermediate as well as a root, so a maker's intermediate
/// named there is enough.
public final class CertificateAuthorities: @unchecked Sendable {
    private let store: OpaquePointer
    public let count: Int
    /// The TPM manufacturers each CA may vouch for, by the CA certificate's DER: from `NAME.manufacturers`
    /// beside `NAME.pem` (one "id:XXXXXXXX" a line). A CA without such a file is trusted for every manufacturer.
    private var pinned: [Data: Set<String>] = [:]

    /// Files larger than this, or more files than `maximumFiles`, are refused rather than read.
    public static let maximumFileSize = 1 << 20, maximumFiles = 1000

    /// Reads `directory`; a file that holds no certificate is an error that names it.
    public init(directory: String) throws {
        guard let store = X509_STORE_new() else { throw AttestationError("out of memory") }
        self.store = store
        var names: [String]
        do {
            names = try Self.files(in: directory)
        } catch {
            X509_STORE_free(store)
            throw error
        }
        var count = 0
        for name in names.sorted() {
            let path = directory + "/" + name
            let certificates: [OpaquePointer]
            do { certificates = try Self.certificates(at: path) } catch {
                X509_STORE_free(store)
                throw error
            }
            let pins: Set<String>?
            do { pins = try Self.manufacturers(beside: path) } catch {
                certificates.forEach { X509_free($0) }
                X509_STORE_free(store)
                throw error
            }
            for certificate in certificates {
                if X509_STORE_add_cert(store, certificate) == 1 { count += 1 }
                if let pins, let der = Self.der(certificate) { pinned[der] = pins }
                X509_free(certificate)
            }
            ERR_clear_error()  // a certificate named twice is not an error
        }
        self.count = count
        X509_STORE_set_flags(store, UInt(X509_V_FLAG_PARTIAL_CHAIN))
    }

    deinit { X509_STORE_free(store) }

    /// Why `certificate` is no EK certificate these CAs vouch for, or nil: the EK profile, the chain to one of these
    /// CAs, and the manufacturers that CA is pinned to.
    public func refusal(of certificate: EndorsementCertificate) -> String? {
        if let why = certificate.profileRefusal {
            return "the certificate issued by \(certificate.issuer.prefix(200)) is not an EK certificate: \(why)"
        }
        guard count > 0 else { return "no CA certificate is installed to check the EK certificate against" }
        guard let parsed = try? EndorsementCertificate.parse(certificate.der), let context = X509_STORE_CTX_new() else {
            return "the EK certificate could not be read"
        }
        defer {
            X509_STORE_CTX_free(context)
            X509_free(parsed)
        }
        guard X509_STORE_CTX_init(context, store, parsed, nil) == 1 else {
            return "the EK certificate could not be checked"
        }
        let verified = X509_verify_cert(context) == 1
        let error = X509_STORE_CTX_get_error(context)
        ERR_clear_error()
        if verified {
            guard let anchor = xign_x509_chain_anchor(context), let der = Self.der(anchor), let pins = pinned[der]
            else { return nil }
            if let manufacturer = certificate.manufacturer,
                pins.contains("id:" + manufacturer.dropFirst(3).uppercased())
            {
                return nil
            }
            return
                "the EK certificate names TPM manufacturer \(certificate.manufacturer?.prefix(64) ?? "none"), which its CA is not pinned to (\(pins.sorted().joined(separator: ", ")))"
        }
        let reason = String(cString: X509_verify_cert_error_string(Int(error)))
        return
            "the EK certificate issued by \(certificate.issuer.prefix(200)) does not chain to a trusted maker CA (\(reason))"
    }

    private static func files(in directory: String) throws -> [String] {
        guard let handle = opendir(directory) else {
            throw AttestationError("cannot read the CA directory \(directory): \(String(cString: strerror(errno)))")
        }
        defer { closedir(handle) }
        var names: [String] = []
        while let entry = readdir(handle) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) {
                String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self)
            }
            guard !name.hasPrefix("."), [".pem", ".crt", ".cer", ".der"].contains(where: { name.hasSuffix($0) }) else {
                continue
            }
            names.append(name)
            guard names.count <= maximumFiles else {
                throw AttestationError("the CA directory \(directory) holds more than \(maximumFiles) files")
            }
        }
        return names
    }

    private static func der(_ certificate: OpaquePointer) -> Data? {
        var buffer: UnsafeMutablePointer<UInt8>? = nil
        let length = i2d_X509(certificate, &buffer)
        guard length > 0, let buffer else { return nil }
        defer { CRYPTO_free(buffer, #file, #line) }
        return Data(bytes: buffer, count: Int(length))
    }

    /// `NAME.manufacturers` beside `NAME.pem`: nil when there is none.
    private static func manufacturers(beside path: String) throws -> Set<String>? {
        let base =
            path.split(separator: "/").last.map { name in name.split(separator: ".").dropLast().joined(separator: ".") }
            ?? ""
        let file = String(path.dropLast(path.split(separator: "/").last?.count ?? 0)) + base + ".manufacturers"
        guard let handle = fopen(file, "rb") else {
            if errno == ENOENT { return nil }
            throw AttestationError("cannot read \(file): \(String(cString: strerror(errno)))")
        }
        defer { fclose(handle) }
        var bytes = [UInt8](repeating: 0, count: 16 * 1024 + 1)
        let count = fread(&bytes, 1, bytes.count, handle)
        guard count < bytes.count else { throw AttestationError("\(file) is larger than 16 KiB") }
        var pins = Set<String>()
        for line in String(decoding: bytes.prefix(count), as: UTF8.self).split(separator: "\n") {
            let entry = String(
                (line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? "").filter {
                    !$0.isWhitespace
                })
            guard !entry.isEmpty else { continue }
            guard entry.hasPrefix("id:"), entry.utf8.count == 11, entry.dropFirst(3).allSatisfy(\.isHexDigit) else {
                throw AttestationError("\(file): '\(entry.prefix(40))' is not a TPM manufacturer such as id:49465800")
            }
            pins.insert("id:" + entry.dropFirst(3).uppercased())
        }
        return pins
    }

    private static func certificates(at path: String) throws -> [OpaquePointer] {
        guard let file = fopen(path, "rb") else {
            throw AttestationError("cannot read \(path): \(String(cString: strerror(errno)))")
        }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = fread(&chunk, 1, chunk.count, file)
            if n == 0 { break }
            bytes += chunk.prefix(n)
            guard bytes.count <= maximumFileSize else {
                fclose(file)
                throw AttestationError("\(path) is larger than 1 MiB; it is not a CA certificate")
            }
        }
        fclose(file)
        var found: [OpaquePointer] = []
        if let der = try? EndorsementCertificate.parse(Data(bytes)) {
            found.append(der)
        } else {
            bytes.withUnsafeBytes { raw in
                guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return }
                while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) { found.append(certificate) }
                BIO_free(bio)
            }
        }
        ERR_clear_error()
        guard !found.isEmpty else { throw AttestationError("\(path) holds no PEM or DER certificate") }
        return found
    }
}
