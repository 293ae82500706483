import Foundation
import XignCrypto
import XignProtocol

/// PINs arrive sealed to the PIN-sealing key (`SealedPINMessage`), so nothing between device and manager reads them.
/// The signing key vouches for the sealing key (`/health`, and the signed answers that come before a PIN), and
/// only signs.
extension IdentityManager {
    /// The PIN inside `sealed`, which must have been made for this manager's sealing key and for `binding`.
    func openPIN(_ sealed: SealedPINMessage, for binding: PINBinding) throws -> String {
        guard let pin = sealed.open(with: secrets.pinSealingKey, for: binding) else {
            throw ManagerError(
                .badRequest, .badRequest,
                "the sealed PIN does not open with this manager's PIN-sealing key for this request: the client pinned another manager, sealed to the signing key as clients before this manager did (update xign there), or the request was changed on the way"
            )
        }
        return pin
    }

    /// The PIN-sealing key as clients take it: SPKI DER, base64url.
    var pinSealingKey: String { Base64URL.encode(secrets.pinSealingKey.publicKey.derRepresentation) }

    /// Refuses a request that carries a PIN in the clear (a client older than sealing), before anything else of it.
    static func refuseClearPIN(in body: Data) throws {
        struct NestedPIN: Decodable { var pin: String? }
        struct ClearPIN: Decodable {
            var pin: String?
            var newPin: String?
            var newActivation: NestedPIN?
        }
        guard let probe = try? JSONDecoder().decode(ClearPIN.self, from: body),
            probe.pin != nil || probe.newPin != nil || probe.newActivation?.pin != nil
        else { return }
        throw ManagerError(
            .badRequest, .securityInsufficient,
            "this manager takes a PIN only sealed to its key, never in the clear; update xign on the machine that sent it"
        )
    }
}
