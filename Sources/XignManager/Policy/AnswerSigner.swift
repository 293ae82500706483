import Foundation
import XignCrypto

/// Signs the manager's answers that change trust (a compact JWS, ES256) with its signing key; the header's `kid` is
/// the key's fingerprint, and a first answer may carry the key itself for a client to compare with what it pinned.
struct AnswerSigner: Sendable {
    let key: P256PrivateKey
    let publicKey: P256PublicKey

    init(key: P256PrivateKey) {
        self.key = key
        publicKey = key.publicKey
    }

    func sign(_ value: some Encodable, type: String, includeKey: Bool = false) throws -> String {
        let header = JWS.Header(
            typ: type, kid: publicKey.fingerprint,
            spki: includeKey ? Base64URL.encode(publicKey.derRepresentation) : nil)
        return try JWS.sign(payload: try JSONEncoder.canonical.encode(value), header: header, with: key)
    }
}
