import Foundation
import SQLKit
import XignCrypto
import XignManagerConfiguration

/// Registrations through an identity provider while they wait for the provider's answer, and then for their client.
extension ManagerStore {
    struct ProviderRegistration: Sendable {
        var id: String
        var provider: String
        var stateHash: String
        var oidcNonce: String
        var codeVerifier: String
        var alias: String?
        var pin: PINVerifier
        var waitTokenHash: String
        /// The web app's registration: the browser is sent on to the activation link.
        var inBrowser: Bool
        /// A custom provider's step the client sends next; nil for a browser provider.
        var customStep: String?
        var outcome: String
        var message: String?
        var email: String?
        var loginName: String?
        /// The activation link, sealed with the record key.
        var sealedActivation: String?
        var expiresAt: Int64
    }

    func insertProviderRegistration(_ registration: ProviderRegistration) async throws {
        try await sql.raw(
            """
            INSERT INTO provider_registrations (id, provider, state_hash, oidc_nonce, code_verifier, alias, pin_salt, pin_verifier,
                                               pin_iterations, pin_pepper, wait_token_hash, in_browser, custom_step, outcome,
                                               expires_at)
            VALUES (\(bind: registration.id), \(bind: registration.provider), \(bind: registration.stateHash),
                    \(bind: registration.oidcNonce), \(bind: registration.codeVerifier), \(bind: registration.alias),
                    \(bind: Base64URL.encode(registration.pin.salt)), \(bind: Base64URL.encode(registration.pin.value)),
                    \(bind: registration.pin.iterations), \(bind: registration.pin.pepper.rawValue),
                    \(bind: registration.waitTokenHash), \(bind: registration.inBrowser ? 1 : 0), \(bind: registration.customStep), 'pending',
                    \(bind: registration.expiresAt))
            """
        ).run()
    }

    /// The pending registration the browser's state names, taken so that a state is answered once.
    func claimProviderRegistration(stateHash: String, now: Int64) async throws -> ProviderRegistration? {
        try await sql.raw(
            """
            UPDATE provider_registrations SET outcome = 'answering'
            WHERE state_hash = \(bind: stateHash) AND outcome = 'pending' AND expires_at > \(bind: now)
            RETURNING \(Self.providerRegistrationColumns)
            """
        ).first().map(ProviderRegistration.init)
    }

    /// The pending registration of a custom provider waiting for `step`, taken while its endpoint is asked.
    func claimCustomRegistration(id: String, step: String, now: Int64) async throws -> ProviderRegistration? {
        try await sql.raw(
            """
            UPDATE provider_registrations SET outcome = 'answering'
            WHERE id = \(bind: id) AND outcome = 'pending' AND custom_step = \(bind: step) AND expires_at > \(bind: now)
            RETURNING \(Self.providerRegistrationColumns)
            """
        ).first().map(ProviderRegistration.init)
    }

    /// Back to pending, waiting for `step`.
    func continueCustomRegistration(id: String, step: String) async throws {
        try await sql.raw(
            "UPDATE provider_registrations SET outcome = 'pending', custom_step = \(bind: step) WHERE id = \(bind: id)"
        ).run()
    }

    func providerRegistration(id: String, now: Int64) async throws -> ProviderRegistration? {
        try await sql.raw(
            """
            SELECT \(Self.providerRegistrationColumns) FROM provider_registrations
            WHERE id = \(bind: id) AND expires_at > \(bind: now)
            """
        ).first().map(ProviderRegistration.init)
    }

    func settleProviderRegistration(
        id: String, outcome: String, message: String?, email: String?, loginName: String?, sealedActivation: String?
    ) async throws {
        try await sql.raw(
            """
            UPDATE provider_registrations SET outcome = \(bind: outcome), message = \(bind: message), email = \(bind: email),
                login_name = \(bind: loginName), activation = \(bind: sealedActivation), code_verifier = ''
            WHERE id = \(bind: id)
            """
        ).run()
    }

    /// Deletes a settled registration once its client has its outcome; false when another wait took it first.
    func deleteProviderRegistration(id: String) async throws -> Bool {
        try await sql.raw("DELETE FROM provider_registrations WHERE id = \(bind: id) RETURNING id").first() != nil
    }

    private static let providerRegistrationColumns = SQLQueryString(
        """
        id, provider, state_hash, oidc_nonce, code_verifier, alias, pin_salt, pin_verifier, pin_iterations, pin_pepper,
        wait_token_hash, in_browser, custom_step, outcome, message, email, login_name, activation, expires_at
        """)
}

extension ManagerStore.ProviderRegistration {
    init(_ row: any SQLRow) throws {
        id = try row.decode(column: "id", as: String.self)
        provider = try row.decode(column: "provider", as: String.self)
        stateHash = try row.decode(column: "state_hash", as: String.self)
        oidcNonce = try row.decode(column: "oidc_nonce", as: String.self)
        codeVerifier = try row.decode(column: "code_verifier", as: String.self)
        alias = try row.decode(column: "alias", as: String?.self)
        guard let salt = Base64URL.decode(try row.decode(column: "pin_salt", as: String.self)),
            let value = Base64URL.decode(try row.decode(column: "pin_verifier", as: String.self))
        else { throw ManagerError.internalFailure("a provider registration's PIN verifier is corrupt") }
        pin = PINVerifier(
            salt: salt, value: value, iterations: try row.decode(column: "pin_iterations", as: Int.self),
            pepper: try row.decode(enumColumn: "pin_pepper", as: PINPepperKind.self))
        waitTokenHash = try row.decode(column: "wait_token_hash", as: String.self)
        inBrowser = try row.decode(column: "in_browser", as: Int.self) != 0
        customStep = try row.decode(column: "custom_step", as: String?.self)
        outcome = try row.decode(column: "outcome", as: String.self)
        message = try row.decode(column: "message", as: String?.self)
        email = try row.decode(column: "email", as: String?.self)
        loginName = try row.decode(column: "login_name", as: String?.self)
        sealedActivation = try row.decode(column: "activation", as: String?.self)
        expiresAt = try row.decode(column: "expires_at", as: Int64.self)
    }
}
