import Foundation
import SQLKit
import XignCrypto
import XignManagerConfiguration

/// Where a registration through an identity provider is: waiting for the provider's answer (`pending`), being answered
/// (`answering`, so that a state is answered once), waiting for the person who signed in to type the start's code
/// (`confirming`), and then settled for its client.
enum ProviderRegistrationState: String, Sendable {
    case pending, answering, confirming, registered, refused

    var isSettled: Bool { self == .registered || self == .refused }
}

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
        var state: ProviderRegistrationState
        var message: String?
        var email: String?
        var loginName: String?
        /// The activation link, sealed with the record key.
        var sealedActivation: String?
        var expiresAt: Int64
        /// The hash of the code the start showed, which the person who signs in must type; nil in the web app, whose
        /// browser is bound by its cookie instead.
        var codeHash: String?
        var codeFailures = 0
        /// The hash of the `__Host-` cookie of the browser the registration belongs to: the web app's from its start,
        /// a terminal's from the provider's answer on.
        var browserHash: String?
        /// Where and when it started, for the person who confirms it.
        var startedFrom: String?
        var startedAt: Int64
        /// The account the provider's claims describe, while it waits for the code (JSON of `IdentityManager.NewAccount`).
        var account: String?
        /// The client's last wait: an account is made only for a client that still waits.
        var lastWaitedAt: Int64
    }

    func insertProviderRegistration(_ registration: ProviderRegistration) async throws {
        try await sql.raw(
            """
            INSERT INTO provider_registrations (id, provider, state_hash, oidc_nonce, code_verifier, alias, pin_salt, pin_verifier,
                                               pin_iterations, pin_pepper, wait_token_hash, in_browser, custom_step, outcome,
                                               expires_at, code_hash, browser_hash, started_from, started_at, last_waited_at)
            VALUES (\(bind: registration.id), \(bind: registration.provider), \(bind: registration.stateHash),
                    \(bind: registration.oidcNonce), \(bind: registration.codeVerifier), \(bind: registration.alias),
                    \(bind: Base64URL.encode(registration.pin.salt)), \(bind: Base64URL.encode(registration.pin.value)),
                    \(bind: registration.pin.iterations), \(bind: registration.pin.pepper.rawValue),
                    \(bind: registration.waitTokenHash), \(bind: registration.inBrowser ? 1 : 0), \(bind: registration.customStep), 'pending',
                    \(bind: registration.expiresAt), \(bind: registration.codeHash), \(bind: registration.browserHash),
                    \(bind: registration.startedFrom), \(bind: registration.startedAt), \(bind: registration.startedAt))
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

    /// The registration the browser with the cookie of `browserHash` signed in for, waiting for its code.
    func confirmingProviderRegistration(browserHash: String, now: Int64) async throws -> ProviderRegistration? {
        try await sql.raw(
            """
            SELECT \(Self.providerRegistrationColumns) FROM provider_registrations
            WHERE browser_hash = \(bind: browserHash) AND outcome = 'confirming' AND expires_at > \(bind: now)
            """
        ).first().map(ProviderRegistration.init)
    }

    /// An answered registration waits for the person to type the start's code, in the browser of `browserHash`, with
    /// the account the provider's claims describe.
    func awaitCode(id: String, account: String, browserHash: String) async throws {
        try await sql.raw(
            """
            UPDATE provider_registrations SET outcome = 'confirming', account = \(bind: account),
                browser_hash = \(bind: browserHash), code_verifier = ''
            WHERE id = \(bind: id) AND outcome = 'answering'
            """
        ).run()
    }

    /// Counts a wrong code of a registration that waits for one; the failures so far, or nil when it waits no more.
    func countWrongCode(id: String) async throws -> Int? {
        try await sql.raw(
            """
            UPDATE provider_registrations SET code_failures = code_failures + 1
            WHERE id = \(bind: id) AND outcome = 'confirming' RETURNING code_failures
            """
        ).first()?.decode(column: "code_failures", as: Int.self)
    }

    /// The client waits now.
    func markWaited(id: String, at now: Int64) async throws {
        try await sql.raw("UPDATE provider_registrations SET last_waited_at = \(bind: now) WHERE id = \(bind: id)")
            .run()
    }

    /// Settles a registration that is not settled yet; false when it was (another answer won).
    @discardableResult
    func settleProviderRegistration(
        id: String, _ state: ProviderRegistrationState, message: String?, email: String?, loginName: String?,
        sealedActivation: String?
    ) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE provider_registrations SET outcome = \(bind: state.rawValue), message = \(bind: message), email = \(bind: email),
                login_name = \(bind: loginName), activation = \(bind: sealedActivation), code_verifier = '', account = NULL
            WHERE id = \(bind: id) AND outcome NOT IN ('registered', 'refused') RETURNING id
            """
        ).first() != nil
    }

    /// Deletes a settled registration once its client has its outcome; false when another wait took it first.
    func deleteProviderRegistration(id: String) async throws -> Bool {
        try await sql.raw("DELETE FROM provider_registrations WHERE id = \(bind: id) RETURNING id").first() != nil
    }

    private static let providerRegistrationColumns = SQLQueryString(
        """
        id, provider, state_hash, oidc_nonce, code_verifier, alias, pin_salt, pin_verifier, pin_iterations, pin_pepper,
        wait_token_hash, in_browser, custom_step, outcome, message, email, login_name, activation, expires_at, code_hash,
        code_failures, browser_hash, started_from, started_at, account, last_waited_at
        """)

    /// A "not me" link of a registration's notice mail: it cancels the activation it names.
    func insertActivationCancellation(tokenHash: String, activationId: String, expiresAt: Int64) async throws {
        try await sql.raw(
            """
            INSERT INTO activation_cancellations (token_hash, activation_id, expires_at)
            VALUES (\(bind: tokenHash), \(bind: activationId), \(bind: expiresAt))
            """
        ).run()
    }

    /// Takes the cancellation of `tokenHash` (once); the activation it names.
    func takeActivationCancellation(tokenHash: String, now: Int64) async throws -> String? {
        try await sql.raw(
            """
            DELETE FROM activation_cancellations WHERE token_hash = \(bind: tokenHash) AND expires_at > \(bind: now)
            RETURNING activation_id
            """
        ).first()?.decode(column: "activation_id", as: String.self)
    }
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
        guard let state = ProviderRegistrationState(rawValue: try row.decode(column: "outcome", as: String.self)) else {
            throw ManagerError.internalFailure("a provider registration is in a state this manager does not know")
        }
        self.state = state
        message = try row.decode(column: "message", as: String?.self)
        email = try row.decode(column: "email", as: String?.self)
        loginName = try row.decode(column: "login_name", as: String?.self)
        sealedActivation = try row.decode(column: "activation", as: String?.self)
        expiresAt = try row.decode(column: "expires_at", as: Int64.self)
        codeHash = try row.decode(column: "code_hash", as: String?.self)
        codeFailures = try row.decode(column: "code_failures", as: Int.self)
        browserHash = try row.decode(column: "browser_hash", as: String?.self)
        startedFrom = try row.decode(column: "started_from", as: String?.self)
        startedAt = try row.decode(column: "started_at", as: Int64.self)
        account = try row.decode(column: "account", as: String?.self)
        lastWaitedAt = try row.decode(column: "last_waited_at", as: Int64.self)
    }
}
