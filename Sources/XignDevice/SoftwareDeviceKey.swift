import FoundationEssentials
import XignCrypto

#if canImport(Glibc)
import Glibc
#endif

/// The explicit fallback: a P-256 key in a 0600 PEM file under the root-only state directory.
/// Whoever can read that file can sign as this device, which is why a manager may refuse this kind.
public struct SoftwareDeviceKey: DeviceKey {
    let privateKey: P256PrivateKey
    public var kind: KeyKind { .software }
    public var publicKey: P256PublicKey { get throws { privateKey.publicKey } }
    public func signature(for message: Data) throws -> Data { try privateKey.signature(for: message) }
}

public struct SoftwareDeviceKeyStore: DeviceKeyStore {
    public let directory: String
    public var kind: KeyKind { .software }
    private var files: KeyFiles { KeyFiles(directory: directory, suffix: ".pem") }

    public init(directory: String) { self.directory = directory }

    public func createPendingKey() throws -> (key: any DeviceKey, reference: String) {
        let key = try P256PrivateKey()
        let reference = try files.writePending(Data(try key.pemRepresentation().utf8))
        return (SoftwareDeviceKey(privateKey: key), reference)
    }

    public func commit(pending: String, as reference: String) throws {
        try files.commit(pending: pending, as: reference)
    }

    public func load(_ reference: String) throws -> any DeviceKey {
        let pem = try files.read(reference)
        do {
            return SoftwareDeviceKey(
                privateKey: try P256PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self)))
        } catch {
            throw DeviceKeyError(
                "the device key \(try files.path(reference)) is damaged (\(error)); remove this enrolment and personalize again"
            )
        }
    }

    public func delete(_ reference: String) throws { try files.delete(reference) }
}
