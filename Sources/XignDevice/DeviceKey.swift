import FoundationEssentials
import XignCrypto

/// A P-256 signing key bound to this machine.
public protocol DeviceKey {
    var kind: KeyKind { get }
    var publicKey: P256PublicKey { get throws }
    /// ECDSA-SHA256 over `message`, raw r || s.
    func signature(for message: Data) throws -> Data
}

public struct DeviceKeyError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Creates, loads and deletes device keys by reference (a file name below the store's directory).
///
/// A new key is created under a pending name and committed only once the manager has accepted it,
/// so a failed personalization leaves nothing behind.
public protocol DeviceKeyStore {
    var kind: KeyKind { get }
    func createPendingKey() throws -> (key: any DeviceKey, reference: String)
    func commit(pending: String, as reference: String) throws
    func load(_ reference: String) throws -> any DeviceKey
    func delete(_ reference: String) throws
}
