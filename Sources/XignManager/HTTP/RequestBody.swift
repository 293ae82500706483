import Foundation
import XignProtocol

/// A request body as the manager takes it: a PIN in the clear refused before anything else, then decoded and checked
/// against the wire's limits (LimitedMessage), once, rather than by the route (a signed body is verified as it
/// arrived).
enum RequestBody {
    /// badRequest names `what`.
    static func decode<T: Decodable & LimitedMessage>(_ type: T.Type, from body: Data, _ what: String) throws -> T {
        try refuseClearPIN(in: body)
        let message: T
        do { message = try JSONDecoder().decode(T.self, from: body) } catch {
            throw ManagerError.badRequest("\(what) is not valid JSON of the expected shape")
        }
        do { try message.checkLimits() } catch { throw ManagerError.badRequest("\(what): \(error)") }
        return message
    }

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
