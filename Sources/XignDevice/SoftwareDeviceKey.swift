#if canImport(Glibc)
import Glibc
#endif
import FoundationEssentials
import XignCrypto

/// The explicit fallback: a P-256 key in a 0600 PEM file under the root-only state directory.
/// Whoever can read that file can sign as this device, which is why a manager may refuse this kind.
public struct SoftwareDeviceKey: DeviceKey {
    let privateKey: P256PrivateKey
    public var kind: DeviceKeyKind { .software }
    public var publicKey: P256PublicKey { get throws { try privateKey.publicKey } }
    public func signature(for message: Data) throws -> Data { try privateKey.signature(for: message) }
}

public struct SoftwareDeviceKeyStore: DeviceKeyStore {
    public let directory: String
    public var kind: DeviceKeyKind { .software }

    public init(directory: String) { self.directory = directory }

    private func path(_ reference: String) throws -> String {
        guard !reference.isEmpty, reference.count <= 80,
              reference.unicodeScalars.allSatisfy({ ($0.isASCII && ($0.properties.isAlphabetic || $0.properties.numericType != nil)) || $0 == "-" || $0 == "_" })
        else { throw DeviceKeyError("invalid key reference '\(reference.prefix(80))'") }
        return "\(directory)/\(reference).pem"
    }

    public func createPendingKey() throws -> (key: any DeviceKey, reference: String) {
        let key = try P256PrivateKey()
        let reference = "pending-" + (try SecureRandom.token(byteCount: 12))
        try makeDirectory()
        try writeFile(Data(try key.pemRepresentation().utf8), to: try path(reference))
        return (SoftwareDeviceKey(privateKey: key), reference)
    }

    public func commit(pending: String, as reference: String) throws {
        let from = try path(pending), to = try path(reference)
        guard rename(from, to) == 0 else {
            throw DeviceKeyError("cannot store the device key as \(to): \(String(cString: strerror(errno)))")
        }
    }

    public func load(_ reference: String) throws -> any DeviceKey {
        let file = try path(reference)
        let fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else {
            throw DeviceKeyError("the device key \(file) cannot be read (\(String(cString: strerror(errno)))); run `xign-setup personalize` again")
        }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 4097)
        let n = read(fd, &buffer, buffer.count)
        guard n > 0, n < buffer.count else { throw DeviceKeyError("the device key \(file) is empty or too large") }
        do {
            return SoftwareDeviceKey(privateKey: try P256PrivateKey(pemRepresentation: String(decoding: buffer.prefix(n), as: UTF8.self)))
        } catch {
            throw DeviceKeyError("the device key \(file) is damaged (\(error)); remove this enrolment and personalize again")
        }
    }

    public func delete(_ reference: String) throws {
        let file = try path(reference)
        guard unlink(file) == 0 || errno == ENOENT else {
            throw DeviceKeyError("cannot delete \(file): \(String(cString: strerror(errno)))")
        }
    }

    private func makeDirectory() throws {
        if mkdir(directory, 0o700) != 0 && errno != EEXIST {
            throw DeviceKeyError("cannot create \(directory): \(String(cString: strerror(errno)))")
        }
    }

    private func writeFile(_ data: Data, to file: String) throws {
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw DeviceKeyError("cannot write \(file): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = data.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == data.count, fsync(fd) == 0 else {
            unlink(file)
            throw DeviceKeyError("cannot write \(file): \(String(cString: strerror(errno)))")
        }
    }
}
