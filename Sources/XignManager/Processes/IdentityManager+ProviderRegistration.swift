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
extension IdentityManager {
    static let providerRegistrationMilliseconds: Int64 = 600_000

    public func identityProviderList() -> IdentityProvidersMessage {
        IdentityProvidersMessage(
            identityProviders: identityProviders.settings.map {
                IdentityProviderMessage(id: $0.id, name: $0.name, type: $0.type)
            },
            defaultIdentityProvider: identityProviders.defaultId)
    }

    public func startProviderRegistration(
        _ request: ProviderRegistrationRequest, from client: String?
    ) async throws -> ProviderRegistrationStartMessage {
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
        let (state, waitToken) = (try SecureRandom.token(), try SecureRandom.token())
        var registration = ManagerStore.ProviderRegistration(
            id: try SecureRandom.identifier(), provider: provider.id, stateHash: Self.hashed(state),
            oidcNonce: try SecureRandom.token(), codeVerifier: try SecureRandom.token(byteCount: 48),
            alias: request.alias, pin: try pinChecker.makeVerifier(pin: pin), waitTokenHash: Self.hashed(waitToken),
            inBrowser: request.continueInBrowser == true, customStep: nil, outcome: "pending",
            expiresAt: Self.now() + Self.providerRegistrationMilliseconds)
        var authorizationURL: String?
        if let openID = identityProviders.openID(provider, redirectURI: callbackURL) {
            let discovery = try await providerCall { try openID.discover() }
            authorizationURL = openID.authorizationURL(
                discovery, state: state, nonce: registration.oidcNonce, codeVerifier: registration.codeVerifier)
        } else if case .custom(_, let steps) = provider.kind {
            registration.customStep = (steps == 2 ? CustomRegistrationStep.`init` : .finish).rawValue
        }
        let row = registration
        try await database.transaction { store in try await store.insertProviderRegistration(row) }
        logger.info("registration through an identity provider started", metadata: ["provider": "\(provider.id)"])
        return ProviderRegistrationStartMessage(
            registrationId: registration.id, authorizationUrl: authorizationURL,
            customStep: registration.customStep.flatMap(CustomRegistrationStep.init(rawValue:)), waitToken: waitToken,
            expiresAt: registration.expiresAt)
    }

    var callbackURL: String { managerURL.endpoint(APIPath.providerRegistrationCallback) }

    /// What the browser shows when it comes back from the provider: done, or why not and what to do.
    public struct ProviderCallbackPage: Sendable {
        public var registered: Bool
        public var message: String
        /// The web app's registration: the activation link the browser goes on to, once.
        public var activationLink: String?
    }

    /// The provider's answer at the callback (its query parameters). Every outcome is kept for the client too.
    public func finishProviderRegistration(_ query: [String: String]) async -> ProviderCallbackPage {
        guard let state = query["state"], state.utf8.count <= WireLimit.nonce else {
            return ProviderCallbackPage(
                registered: false,
                message: "This page was opened without a registration; start it again from xign-setup or the web app.")
        }
        let claimed: ManagerStore.ProviderRegistration?
        do {
            claimed = try await database.transaction { store in
                try await store.claimProviderRegistration(stateHash: Self.hashed(state), now: Self.now())
            }
        } catch {
            logger.error("provider registration: \(error)")
            return ProviderCallbackPage(
                registered: false, message: "The manager could not read the registration; try again.")
        }
        guard let registration = claimed else {
            return ProviderCallbackPage(
                registered: false,
                message: "This registration is unknown, was already answered, or ran out (10 minutes); start it again.")
        }
        do {
            let account = try await registerFromProvider(registration, query)
            if registration.inBrowser {
                return ProviderCallbackPage(
                    registered: true, message: "Registered as \(account.email).",
                    activationLink: try await takeActivationLink(registration.id))
            }
            return ProviderCallbackPage(
                registered: true,
                message:
                    "Registered as \(account.email)\(account.loginName.map { " (login name \($0))" } ?? ""). Go back to where you started: the activation continues there."
            )
        } catch {
            let message =
                (error as? OpenIDProvider.Failure)?.description ?? (error as? ManagerError)?.detail.message
                ?? "the manager could not finish the registration; its log has the details"
            if !(error is OpenIDProvider.Failure || error is ManagerError) {
                logger.error("provider registration: \(error)")
            }
            logger.notice(
                "registration through an identity provider refused",
                metadata: ["provider": "\(registration.provider)", "why": "\(message)"])
            try? await database.transaction { store in
                try await store.settleProviderRegistration(
                    id: registration.id, outcome: "refused", message: message, email: nil, loginName: nil,
                    sealedActivation: nil)
            }
            return ProviderCallbackPage(registered: false, message: "No account was made: \(message).")
        }
    }

    private func registerFromProvider(
        _ registration: ManagerStore.ProviderRegistration, _ query: [String: String]
    ) async throws -> (email: String, loginName: String?) {
        if let error = query["error"] {
            let said = DisplayText.sanitized(query["error_description"] ?? error, keepingLineFeeds: false).prefix(200)
            throw OpenIDProvider.Failure("the identity provider refused the sign-in (\(said))")
        }
        guard let code = query["code"], !code.isEmpty, code.utf8.count <= 4096 else {
            throw OpenIDProvider.Failure("the identity provider came back without a code")
        }
        let provider = try identityProviders.provider(registration.provider)
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
        return try await register(registration, claims: claims.claims, from: provider)
    }

    /// Makes the account the provider's claims describe, with the activation PIN chosen at the start, and keeps the
    /// activation data, sealed, for the client.
    private func register(
        _ registration: ManagerStore.ProviderRegistration, claims: [String: [String]],
        from provider: IdentityProviderSettings
    ) async throws -> (email: String, loginName: String?) {
        let account = try ClaimMapping(provider).account(from: claims)
        let activation = try activations.makeActivation(verifier: registration.pin)
        _ = try await activations.createAccount(
            account, activation: activation, alias: registration.alias, by: "identity provider \(provider.id)",
            mailed: false)
        let link = activations.payload(for: activation).appLink
        try await database.transaction { store in
            try await store.settleProviderRegistration(
                id: registration.id, outcome: "registered", message: nil, email: account.email,
                loginName: account.loginName, sealedActivation: try self.secrets.seal(link))
        }
        logger.info(
            "registered account through an identity provider",
            metadata: ["provider": "\(provider.id)", "email": "\(account.email)"])
        return (account.email, account.loginName)
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
                _ = try await register(registration, claims: claims, from: provider)
                return CustomRegistrationStepMessage(outcome: .registered, info: info)
            case .refused(let reason):
                throw OpenIDProvider.Failure("\(provider.name) refused the registration: \(reason)")
            }
        } catch {
            let message =
                (error as? OpenIDProvider.Failure)?.description ?? (error as? ManagerError)?.detail.message
                ?? "the manager could not finish the registration; its log has the details"
            try await database.transaction { store in
                try await store.settleProviderRegistration(
                    id: registration.id, outcome: "refused", message: message, email: nil, loginName: nil,
                    sealedActivation: nil)
            }
            var answer = CustomRegistrationStepMessage(outcome: .refused)
            answer.message = message
            return answer
        }
    }

    /// The activation link of a settled registration, given once (the row goes with it).
    private func takeActivationLink(_ id: String) async throws -> String? {
        try await database.transaction { store in
            guard let row = try await store.providerRegistration(id: id, now: Self.now()),
                try await store.deleteProviderRegistration(id: id)
            else { return nil }
            return try row.sealedActivation.map { try self.secrets.open($0) }
        }
    }

    /// The client's wait: pending until the browser came back, then the outcome once (signed over its nonce).
    public func waitForProviderRegistration(_ request: ProviderRegistrationWaitRequest) async throws -> String {
        let deadline = Self.now() + min(max(request.waitMilliseconds, 0), 30_000)
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
            if registration.outcome == "registered" || registration.outcome == "refused" {
                guard try await database.transaction({ try await $0.deleteProviderRegistration(id: registration.id) })
                else { continue }
                answer.outcome = registration.outcome == "registered" ? .registered : .refused
                answer.message = registration.message
                answer.email = registration.email
                answer.loginName = registration.loginName
                answer.activationLink = try registration.sealedActivation.map { try secrets.open($0) }
                return try signer.sign(answer, type: SignedAnswerType.providerRegistration)
            }
            if Self.now() >= deadline { return try signer.sign(answer, type: SignedAnswerType.providerRegistration) }
            try await Task.sleep(for: .milliseconds(250))
        }
    }

    /// A blocking call to a provider on the providers' threads; its failure is the manager's 502 with what to do.
    private func providerCall<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
        do { return try await identityProviders.run(work) } catch let failure as OpenIDProvider.Failure {
            throw ManagerError(.badGateway, .providerUnavailable, failure.description)
        }
    }
}
