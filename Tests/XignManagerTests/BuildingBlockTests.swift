import Foundation
import Logging
import Testing
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignTestSupport

@testable import XignManager

/// The manager's building blocks, each with what it is given and nothing else: no database where it needs none.
@Suite struct BuildingBlockTests {
    static let pam = ManagerConfiguration.Service(
        id: "pam", relyingPartyName: "Linux login",
        roles: [RoleMessage(name: "login", requestedAuthenticators: [[.device, .pin]])],
        attributes: [
            AttributeMessage(name: "email", isRequired: true), AttributeMessage(name: "givenName", isRequired: false),
        ],
        tokenLifetimeMilliseconds: 45_000)

    @Test func anAnswerIsSignedWithTheManagerKeyForItsTypeOnly() throws {
        let signer = AnswerSigner(key: try P256PrivateKey())
        let compact = try signer.sign(["nonce": "n"], type: SignedAnswerType.loginToken)
        let payload = try JWS.verify(compact, expectedType: SignedAnswerType.loginToken, key: signer.publicKey)
        #expect(try JSONDecoder().decode([String: String].self, from: payload) == ["nonce": "n"])
        #expect(throws: (any Error).self) {
            try JWS.verify(compact, expectedType: SignedAnswerType.authenticationResult, key: signer.publicKey)
        }
        #expect(throws: (any Error).self) {
            try JWS.verify(compact, expectedType: SignedAnswerType.loginToken, key: try P256PrivateKey().publicKey)
        }
    }

    @Test func aLoginNamesAConfiguredServiceAndEachProcessHasItsOwn() throws {
        let catalog = ServiceCatalog(configured: [Self.pam])
        #expect(try catalog.service(for: .login(service: "pam")).relyingPartyName == "Linux login")
        let unknown = #expect(throws: ManagerError.self) { try catalog.service(for: .login(service: "ssh")) }
        #expect(unknown?.status == .notFound && unknown?.description.contains("'ssh'") == true)
        let confirm = try catalog.service(for: .confirmation(id: "c"))
        #expect(confirm.id == "confirm" && confirm.roles.map(\.requestedAuthenticators) == [[[.device, .pin]]])
        #expect(confirm.attributes.isEmpty)
        let grant = try catalog.service(for: .apiAccess(process: .changePin))
        #expect(grant.tokenLifetimeMilliseconds == ServiceCatalog.apiAccessGrantMilliseconds)
    }

    /// What the service asks for, the login's values over the account's, bound and timed.
    @Test func aLoginTokenHoldsWhatTheServiceAsksFor() {
        let token = LoginTokens.token(
            nonce: "n", deviceId: "d", activationId: "a", service: Self.pam, role: "login", host: "db1",
            localUser: "alice",
            known: ["email": "alice@example.org", "givenName": "Al", "phone": "+1"], given: ["givenName": "Alice"],
            now: 1_000)
        #expect(token.subject == "alice@example.org")
        #expect(token.attributes == ["email": "alice@example.org", "givenName": "Alice"], "phone is not asked for")
        #expect((token.host, token.localUser, token.nonce, token.role) == ("db1", "alice", "n", "login"))
        #expect(token.expiresAt == 1_000 + Self.pam.tokenLifetimeMilliseconds)
    }
}
