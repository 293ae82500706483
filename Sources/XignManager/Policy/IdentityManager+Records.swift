import Foundation
import XignCrypto

/// What the database keeps about people without showing it to whoever holds a copy: queued mail is sealed under
/// the record key, and a deleted account's address becomes a keyed hash in the audit it leaves behind.
extension IdentityManager {
    private static let sealedPrefix = "sealed-v1:"

    /// `message` as the mail queue keeps it.
    func sealedForQueue(_ message: String) throws -> String {
        Self.sealedPrefix + Base64URL.encode(try SecretBox.seal(Data(message.utf8), key: secrets.recordKey))
    }

    /// A queued message as it goes out. Rows queued before sealing existed are taken as they are.
    func openedFromQueue(_ stored: String) throws -> String {
        guard stored.hasPrefix(Self.sealedPrefix) else { return stored }
        guard let box = Base64URL.decode(String(stored.dropFirst(Self.sealedPrefix.count))),
            let message = String(bytes: try SecretBox.open(box, key: secrets.recordKey), encoding: .utf8)
        else { throw ManagerError.internalFailure("a queued mail does not open with this manager's signing key") }
        return message
    }

    /// What stands for `email` in the audit once its account is deleted: the same for the same address (so an
    /// administrator who knows it can find the entries, `admin audit --email`), and nothing that gives it back.
    public func pseudonym(ofEmail email: String) -> String {
        let code = HMACSHA256.authenticationCode(
            for: Data("audit-email\n\(email.lowercased())".utf8), key: secrets.recordKey)
        return "deleted-" + Base64URL.encode(code.prefix(16))
    }
}
