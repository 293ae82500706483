import Foundation
import XignCrypto
import XignIdentityProviders
import XignManagerConfiguration
import XignProtocol

/// Registration through the organization's identity provider. The client chooses the activation PIN and starts.
/// With a browser provider (OpenID Connect, code flow with PKCE and a nonce) the person signs in at the provider in
/// any browser, which comes back to the callback, and the manager checks the ID token; with a custom one the client
/// sends each step's data, which the organization's service judges. The manager makes the account from the claims
/// (no mail step: the provider vouched for the address) and hands the activation data to the client, once.
///
/// Whoever signs in at the provider gets an account made, so the sign-in must be bound to the one who started
/// (docs/security.md, H1; the OAuth cross-device BCP): the web app's start binds its browser with a `__Host-` cookie
/// that the provider's answer must bring back, and a terminal's start shows a code that the person who signed in types
/// at the manager's page (IdentityManager+ProviderConfirmation), beside what is being registered.
extension IdentityManager {
    static let providerRegistrationMilliseconds: Int64 = 600_000

    public func identityProviderList() -> IdentityProvidersMessage {
        IdentityProvidersMessage(
            identityProviders: identityProviders.settings.map {
                IdentityProviderMessage(id: $0.id, name: $0.name, type: $0.type)
            },
            defaultIdentityProvider: identityProviders.defaultId)
    }

    /// A started registration, and for the web app the secret of the `__Host-` cookie its browser gets.
    public struct ProviderRegistrationStart: Sendable {
        public var message: ProviderRegistrationStartMessage
        public var browserSecret: String?
    }

    public func startProviderRegistration(
        _ request: ProviderRegistrationRequest, from client: String?
    ) async throws -> ProviderRegistrationStart {
        // `registration.open = false` closes registration by mail only: a configured provider is the administrator's
        // own choice of who may register.
        if let client { try await rateLimiter.charge(.registrationsPerAddress, key: client) }
        let provider = try identityProviders.provider(request.identityProvider)
        let pin = try pinChecker.open(
            request.sealedPin, for: .providerRegistration(provider: provider.id, nonce: request.nonce))
        let pinVerdict = configuration.pinPolicy.validate(pin)
        var errors: [String: AttributeErrorCode] = [:]
        if pinVerdict != .valid { errors["pin"] = .invalid }
        if let alias = request.alias, configuration.aliasPolicy.validate(alias) != .valid { errors["alias"] = .invalid }
        guard errors.isEmpty else {
            throw ManagerError(
                .unprocessableContent, .registrationRejected,
                "the registration was rejected; choose another PIN or alias",
                attributes: errors, pinError: pinVerdict == .valid ? nil : pinVerdict.rawValue)
        }
        let inBrowser = request.continueInBrowser == true
        let (state, waitToken) = (try SecureRandom.token(), try SecureRandom.token())
        let browserSecret = inBrowser ? try SecureRandom.token() : nil
        let now = Self.now()
        var registration = ManagerStore.ProviderRegistration(
            id: try SecureRandom.identifier(), provider: provider.id, stateHash: Self.hashed(state),
            oidcNonce: try SecureRandom.token(), codeVerifier: try SecureRandom.token(byteCount: 48),
            alias: request.alias, pin: try pinChecker.makeVerifier(pin: pin), waitTokenHash: Self.hashed(waitToken),
            inBrowser: inBrowser, customStep: nil, state: .pending,
            expiresAt: now + Self.providerRegistrationMilliseconds, browserHash: browserSecret.map(Self.hashed),
            startedFrom: client, startedAt: now, lastWaitedAt: now)
        var authorizationURL: String?
        var code: String?
        if let openID = identityProviders.openID(provider, redirectURI: callbackURL) {
            let discovery = try await providerCall { try openID.discover() }
            authorizationURL = openID.authorizationURL(
                discovery, state: state, nonce: registration.oidcNonce, codeVerifier: registration.codeVerifier)
            if !inBrowser { code = try ConfirmationQueue.code() }
        } else if case .custom(_, let steps) = provider.kind {
            registration.customStep = (steps == 2 ? CustomRegistrationStep.`init` : .finish).rawValue
        }
        registration.codeHash = code.map(Self.hashed)
        let row = registration
        try await database.transaction { store in try await store.insertProviderRegistration(row) }
        logger.info("registration through an identity provider started", metadata: ["provider": "\(provider.id)"])
        return ProviderRegistrationStart(
            message: ProviderRegistrationStartMessage(
                registrationId: registration.id, authorizationUrl: authorizationURL,
                customStep: registration.customStep.flatMap(CustomRegistrationStep.init(rawValue:)),
                waitToken: waitToken, expiresAt: registration.expiresAt, confirmationCode: code),
            browserSecret: browserSecret)
    }

    var callbackURL: String { managerURL.endpoint(APIPath.providerRegistrationCallback) }

    /// What the browser gets when it comes back from the provider.
    public enum ProviderCallbackPage: Sendable {
        /// The person who signed in is asked for the code the start showed, beside what is being registered; the
        /// browser gets `browserSecret` as its cookie, which the code's request must bring.
        case confirm(ProviderRegistrationView, browserSecret: String)
        /// The web app's registration: on to the activation link, once.
        case activation(link: String)
        /// Why not, and what to do.
        case refused(String)
    }

    /// What the page that asks for the code shows: who signed in, and what is to become a device of theirs.
    public struct ProviderRegistrationView: Sendable {
        public var provider: String
        public var email: String
        public var alias: String
        public var startedAt: Int64
        public var startedFrom: String?
    }

    /// The provider's answer at the callback (its query parameters), in a browser that brings `browserSecret`, the
    /// registration cookie, if it has one. Every outcome is kept for the client too.
    public func finishProviderRegistration(
        _ query: [String: String], browserSecret: String?
    ) async -> ProviderCallbackPage {
        guard let state = query["state"], state.utf8.count <= WireLimit.nonce else {
            return .refused(
                "This page was opened without a registration; start it again from xign-setup or the web app.")
        }
        let claimed: ManagerStore.ProviderRegistration?
        do {
            claimed = try await database.transaction { store in
                try await store.claimProviderRegistration(stateHash: Self.hashed(state), now: Self.now())
            }
        } catch {
            logger.error("provider registration: \(error)")
            return .refused("The manager could not read the registration; try again.")
        }
        guard let registration = claimed else {
            return .refused(
                "This registration is unknown, was already answered, or ran out (10 minutes); start it again.")
        }
        do {
            if registration.inBrowser {
                // The web app's start gave its browser the cookie: a sign-in link opened in another browser (sent to
                // someone else) ends here.
                guard let browserSecret, let bound = registration.browserHash,
                    constantTimeEquals(Data(Self.hashed(browserSecret).utf8), Data(bound.utf8))
                else {
                    throw OpenIDProvider.Failure(
                        "this sign-in belongs to a registration started in another browser. If someone sent you the link, do not go on: the registration would be theirs. To register yourself, start at this manager's /register page in this browser"
                    )
                }
            }
            let provider = try identityProviders.provider(registration.provider)
            let account = try await account(from: query, of: registration, provider: provider)
            if registration.inBrowser {
                return .activation(link: try await register(registration, account, from: provider))
            }
            let secret = try SecureRandom.token()
            let pending = String(decoding: try JSONEncoder.canonical.encode(account), as: UTF8.self)
            try await database.transaction { store in
                try await store.awaitCode(id: registration.id, account: pending, browserHash: Self.hashed(secret))
            }
            return .confirm(
                ProviderRegistrationView(
                    provider: provider.name, email: account.email, alias: registration.alias ?? "Activation 1",
                    startedAt: registration.startedAt, startedFrom: registration.startedFrom),
                browserSecret: secret)
        } catch {
            let message = refusal(error)
            logger.notice(
                "registration through an identity provider refused",
                metadata: ["provider": "\(registration.provider)", "why": "\(message)"])
            try? await database.transaction { store in
                try await store.settleProviderRegistration(
                    id: registration.id, .refused, message: message, email: nil, loginName: nil, sealedActivation: nil)
            }
            return .refused("No account was made: \(message).")
        }
    }

    /// The account the provider's answer describes, checked as far as it can be before the person confirms: the ID
    /// token, the claims (ClaimMapping), and an address and login name nobody has yet.
    private func account(
        from query: [String: String], of registration: ManagerStore.ProviderRegistration,
        provider: IdentityProviderSettings
    ) async throws -> NewAccount {
        if let error = query["error"] {
            // The rest of the query is anyone's text on this origin: only an error code OAuth defines is shown.
            logger.notice(
                "the identity provider refused a sign-in",
                metadata: [
                    "error": "\(LogText.field(error, maximumLength: 64))",
                    "description": "\(LogText.field(query["error_description"] ?? "", maximumLength: 200))",
                ])
            throw OpenIDProvider.Failure(
                "the identity provider refused the sign-in (\(Self.oauthErrors.contains(error) ? error : "an error it did not name"))"
            )
        }
        guard let code = query["code"], !code.isEmpty, code.utf8.count <= 4096 else {
            throw OpenIDProvider.Failure("the identity provider came back without a code")
        }
        guard let openID = identityProviders.openID(provider, redirectURI: callbackURL),
            case .openID(let issuer, let clientId, _) = provider.kind
        else {
            throw OpenIDProvider.Failure("\(provider.name) is no browser identity provider")
        }
        let (token, keys) = try await providerCall {
            let discovery = try openID.discover()
            return (
                try openID.exchange(code: code, codeVerifier: registration.codeVerifier, discovery),
                try openID.keys(discovery)
            )
        }
        let claims = try await IDTokenCheck(issuer: issuer.description, clientId: clientId).claims(
            of: token, keys: keys, nonce: registration.oidcNonce, now: Date())
        let account = try ClaimMapping(provider).account(from: claims.claims)
        try await activations.checkFree(account)
        return account
    }

    /// The error codes of an authorization error answer (RFC 6749 4.1.2.1, OpenID Connect Core 3.1.2.6).
    static let oauthErrors: Set<String> = [
        "invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type", "invalid_scope",
        "server_error", "temporarily_unavailable", "interaction_required", "login_required",
        "account_selection_required", "consent_required", "invalid_request_uri", "invalid_request_object",
        "request_not_supported", "request_uri_not_supported", "registration_not_supported",
    ]

    /// Why a registration ended, for the person and the client: every error says what happened and what to do.
    func refusal(_ error: any Error) -> String {
        switch error {
        case let failure as OpenIDProvider.Failure: return failure.description
        case let error as ManagerError: return error.detail.message
        case is CancellationError:
            return
                "the manager stopped before it finished (it is shutting down or overloaded); start the registration again"
        default:
            logger.error("provider registration: \(error)")
            return
                "the manager could not finish the registration (\(String(describing: type(of: error)).prefix(64))); its log has the details"
        }
    }

    /// A custom provider's step: the person's data goes to the organization's endpoint, which accepts (the account is
    /// made; its activation data waits at the wait), refuses, or, after the init step, asks for the finish step.
    public func customRegistrationStep(
        _ request: CustomRegistrationStepRequest
    ) async throws
        -> CustomRegistrationStepMessage
    {
        let registration = try await database.transaction { store -> ManagerStore.ProviderRegistration in
            guard
                let found = try await store.providerRegistration(id: request.registrationId, now: Self.now()),
                constantTimeEquals(Data(Self.hashed(request.waitToken).utf8), Data(found.waitTokenHash.utf8)),
                let claimed = try await store.claimCustomRegistration(
                    id: found.id, step: request.step.rawValue, now: Self.now())
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "this registration is unknown, ran out, is not at the \(request.step.rawValue) step, or was answered; start it again"
                )
            }
            return claimed
        }
        let provider = try identityProviders.provider(registration.provider)
        guard let endpoint = identityProviders.custom(provider) else {
            throw ManagerError.badRequest("\(provider.name) is no custom identity provider")
        }
        do {
            switch try await identityProviders.run({
                try endpoint.call(
                    request.step == .`init` ? .`init` : .finish, registrationId: registration.id, data: request.data)
            }) {
            case .continued(let info):
                try await database.transaction { store in
                    try await store.continueCustomRegistration(id: registration.id, step: "finish")
                }
                return CustomRegistrationStepMessage(outcome: .pending, nextStep: .finish, info: info)
            case .accepted(let claims, let info):
                let account = try ClaimMapping(provider).account(from: claims)
                try await activations.checkFree(account)
                _ = try await register(registration, account, from: provider)
                return CustomRegistrationStepMessage(outcome: .registered, info: info)
            case .refused(let reason):
                throw OpenIDProvider.Failure("\(provider.name) refused the registration: \(reason)")
            }
        } catch {
            let message = refusal(error)
            try await database.transaction { store in
                try await store.settleProviderRegistration(
                    id: registration.id, .refused, message: message, email: nil, loginName: nil, sealedActivation: nil)
            }
            var answer = CustomRegistrationStepMessage(outcome: .refused)
            answer.message = message
            return answer
        }
    }

    /// The client's wait: pending until the registration is settled, then the outcome once (signed over its nonce).
    /// Each wait marks the client as there: an account is made only for a client that still waits.
    public func waitForProviderRegistration(_ request: ProviderRegistrationWaitRequest) async throws -> String {
        let deadline = Self.now() + min(max(request.waitMilliseconds, 0), 30_000)
        var marked = false
        while true {
            let registration = try await database.read { store in
                try await store.providerRegistration(id: request.registrationId, now: Self.now())
            }
            guard let registration,
                constantTimeEquals(Data(Self.hashed(request.waitToken).utf8), Data(registration.waitTokenHash.utf8))
            else {
                throw ManagerError(
                    .notFound, .sessionInvalid,
                    "this registration is unknown, ran out, or its outcome was given already; start it again")
            }
            var answer = ProviderRegistrationResultMessage(
                nonce: request.nonce, registrationId: registration.id, outcome: .pending)
            if registration.state.isSettled {
                guard try await database.transaction({ try await $0.deleteProviderRegistration(id: registration.id) })
                else { continue }
                answer.outcome = registration.state == .registered ? .registered : .refused
                answer.message = registration.message
                answer.email = registration.email
                answer.loginName = registration.loginName
                answer.activationLink = try registration.sealedActivation.map { try secrets.open($0) }
                return try signer.sign(answer, type: SignedAnswerType.providerRegistration)
            }
            if !marked {
                try await database.transaction { store in
                    try await store.markWaited(id: registration.id, at: Self.now())
                }
                marked = true
            }
            if Self.now() >= deadline { return try signer.sign(answer, type: SignedAnswerType.providerRegistration) }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// A blocking call to a provider on the providers' threads; its failure is the manager's 502 with what to do.
    func providerCall<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        do { return try await identityProviders.run(work) } catch let failure as OpenIDProvider.Failure {
            throw ManagerError(.badGateway, .providerUnavailable, failure.description)
        }
    }
}
