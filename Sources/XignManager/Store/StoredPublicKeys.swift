import Synchronization
import XignCrypto

/// The device and host keys as the store keeps them (base64url DER), each parsed once and kept, at most `capacity` of
/// them (past that an arbitrary one makes room). A login reads its device's row three times, and each parse was an
/// OpenSSL key import that cost more than the signature check it served. Keyed by the stored text itself, so a
/// changed key is a new entry.
final class StoredPublicKeys: Sendable {
    static let shared = StoredPublicKeys(capacity: 4096)

    private let capacity: Int
    private let keys = Mutex<[String: P256PublicKey]>([:])

    init(capacity: Int) { self.capacity = capacity }

    /// The key `text` holds, or nil when it is no P-256 public key (nothing is kept for it then).
    func key(_ text: String) -> P256PublicKey? {
        if let key = keys.withLock({ $0[text] }) { return key }
        guard let bytes = Base64URL.decode(text), let key = try? P256PublicKey(derRepresentation: bytes) else {
            return nil
        }
        keys.withLock { keys in
            if keys.count >= capacity { keys.remove(at: keys.startIndex) }
            keys[text] = key
        }
        return key
    }

    var count: Int { keys.withLock(\.count) }
}
