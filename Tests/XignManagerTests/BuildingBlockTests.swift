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

/// The PIN check alone, over SQLite in a temporary directory: an account made as registration makes it, then the
/// checker with what it was given.
@Suite struct PINCheckerTests {
    static func withActivation(_ body: (PINChecker, String) async throws -> Void) async throws {
        let directory = TemporaryDirectory()
        var configuration = try ManagerConfiguration(file: ConfigFile(text: ManagerProcess.testConfig, source: "test"))
        configuration.keepData(in: directory.file("manager"))
        let manager = try await IdentityManager.open(configuration: configuration, logger: Logger(label: "test"))
        do {
            _ = try await manager.activations.createAccount(
                IdentityManager.NewAccount(email: "alice@example.org", loginName: nil, attributes: [:]), pin: "24680",
                alias: nil, by: "test")
            let activation = try #require(
                try await manager.administration.activations(email: "alice@example.org").first
            ).id
            try await body(manager.pinChecker, activation)
        } catch {
            await manager.database.close()
            throw error
        }
        await manager.database.close()
    }

    static let purpose = PINChecker.Purpose(service: "pam", host: "db1", actor: "test")

    @Test func aWrongPINIsChargedAndTheRightOneClearsTheCount() async throws {
        try await Self.withActivation { checker, activation in
            let admit = { @Sendable (record: ManagerStore.ActivationRecord?) in try #require(record) }
            let wrong = try await checker.check("13570", activationId: activation, for: Self.purpose, admit: admit)
            #expect(wrong.lockout?.failedAttempts == 1)
            try await Task.sleep(for: .milliseconds(400))  // past the test config's 300 ms lock
            let right = try await checker.check("24680", activationId: activation, for: Self.purpose, admit: admit)
            #expect(right.lockout == nil && right.activation.id == activation)
            let record = try await checker.database.read { try await $0.activation(id: activation) }
            #expect(record?.failedAttempts == 0, "the right PIN cleared the count")
        }
    }

    /// A device that no longer holds the activation is refused before any hash, and nothing is charged.
    @Test func anotherDeviceIsRefusedAndNothingIsCharged() async throws {
        try await Self.withActivation { checker, activation in
            let refused = await #expect(throws: ManagerError.self) {
                try await checker.check("13570", ofDevice: "someone-else", activationId: activation, for: Self.purpose)
            }
            #expect(refused?.detail.code == .deviceNotFound)
            let record = try await checker.database.read { try await $0.activation(id: activation) }
            #expect(record?.failedAttempts == 0 && record?.pinCheckUntil == 0)
        }
    }

    /// A claim this instance left (a check cut off by a restart) is charged when the next `serve` starts.
    @Test func aCheckCutOffByARestartIsChargedOnce() async throws {
        try await Self.withActivation { checker, activation in
            try await checker.database.transaction { store in
                try await store.claimPINCheck(
                    activationId: activation, until: IdentityManager.now() + 30_000, by: checker.instanceId)
            }
            #expect(try await checker.settleAbandonedChecks() == 1)
            #expect(try await checker.settleAbandonedChecks() == 0, "charged once")
            let record = try await checker.database.read { try await $0.activation(id: activation) }
            #expect(record?.failedAttempts == 1)
        }
    }
}
