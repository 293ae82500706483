import Foundation
import XignManagerConfiguration
import XignProtocol

/// The login token a login buys, at its finish or for its single-use authorization code: the account's attributes,
/// with the values the login gave for missing ones, as far as the service asks for them; bound to the host, the
/// local user and the client's nonce, and signed by the manager.
struct LoginTokens: Sendable {
    let database: Database
    let services: ServiceCatalog
    let signer: AnswerSigner

    /// Exchanges a single-use authorization code for the token.
    func redeem(_ request: TokenRequest) async throws -> String {
        let now = IdentityManager.now()
        let token = try await database.transaction { store -> LoginTokenMessage in
            guard let grant = try await store.redeemAuthorizationCode(request.authorizationCode, now: now) else {
                throw ManagerError(
                    .conflict, .challengeInvalid, "the authorization code is unknown, expired or was used")
            }
            guard case .login = grant.purpose else {
                throw ManagerError(
                    .conflict, .challengeInvalid,
                    "an api access grant is no authorization code; finish it at \(APIPath.apiAccess)")
            }
            let device = try await DeviceEligibility.enrolledDevice(grant.deviceId, in: store)
            let given =
                (try? JSONDecoder().decode([String: String].self, from: Data((grant.attributes ?? "{}").utf8))) ?? [:]
            return Self.token(
                nonce: request.nonce, deviceId: device.id, activationId: device.activationId,
                service: try services.service(for: grant.purpose), role: grant.role, host: grant.host,
                localUser: grant.localUser, known: try await store.accountAttributes(activationId: device.activationId),
                given: given, now: now)
        }
        return try signer.sign(token, type: SignedAnswerType.loginToken)
    }

    static func token(
        nonce: String, deviceId: String, activationId: String, service: ManagerConfiguration.Service, role: String,
        host: String, localUser: String, known: [String: String], given: [String: String], now: Int64
    ) -> LoginTokenMessage {
        let values = known.merging(given) { _, new in new }
        return LoginTokenMessage(
            nonce: nonce, subject: values["email"] ?? "", deviceId: deviceId, activationId: activationId,
            service: service.id, role: role, host: host, localUser: localUser,
            attributes: values.filter { key, _ in service.attributes.contains { $0.name == key } },
            issuedAt: now, expiresAt: now + service.tokenLifetimeMilliseconds)
    }
}
