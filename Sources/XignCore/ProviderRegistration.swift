import FoundationEssentials
import XignCrypto
import XignProtocol

/// Registration through the organization's identity provider (OneWelcome's browser identity provider): the client
/// starts with the activation PIN, the person signs in at the provider in a browser, and the client waits for the
/// activation data, which the manager signs over the client's nonce.
extension Registry {
    /// The providers the manager offers, and its default (OneWelcome's `identityProviders`).
    public func identityProvidersSynchronous(url: ManagerURL) throws -> IdentityProvidersMessage {
        try ManagerClient(url: url, http: http).get(APIPath.identityProviders)
    }

    /// A registration that waits for the person to sign in at the provider.
    public struct ProviderRegistration: Sendable {
        public let managerURL: ManagerURL
        public let registrationId: String
        /// A browser provider's: open it in a browser (shown as a link and a QR code).
        public let authorizationURL: String?
        /// A custom provider's first step (`customStepSynchronous`).
        public let customStep: CustomRegistrationStep?
        public let expiresAt: Int64
        /// What the person who signs in types at the manager's page afterwards: only they can finish it, not someone
        /// the sign-in link was sent to.
        public let confirmationCode: String?
        let waitToken: String
        /// The key the manager named at the start; its signed outcome must verify with it.
        let signingKey: P256PublicKey
        /// The activation PIN chosen at the start, which opens the activation data at the end.
        let pin: String
    }

    /// Starts with the activation PIN and alias set on `parameters` (their policy is the manager's).
    public func startProviderRegistrationSynchronous(
        data parameters: RegistrationParameters, provider: String?
    ) throws -> ProviderRegistration {
        guard let pin = parameters.pinSpec.pin else {
            throw XignSdkError(.parametersIncomplete, "the activation PIN is not set (or was not valid)")
        }
        let (url, alias) = (parameters.managerURL, parameters.alias)
        let client = ManagerClient(url: url, http: http)
        // Nothing is pinned before the first activation data: the key is the one the manager names over TLS, and the
        // activation data's fingerprint is checked against it at the personalization.
        let keys = try client.managerKeys(pinnedTo: nil)
        let nonce = Base64URL.encode(try SecureRandom.bytes(16))
        var name = provider ?? ""
        if provider == nil { name = try identityProvidersSynchronous(url: url).defaultIdentityProvider ?? "" }
        let request = ProviderRegistrationRequest(
            identityProvider: provider,
            sealedPin: try ManagerClient.seal(
                pin, to: keys.sealing, for: .providerRegistration(provider: name, nonce: nonce)),
            alias: alias, nonce: nonce)
        let started: ProviderRegistrationStartMessage = try client.post(APIPath.providerRegistrations, request)
        guard started.authorizationUrl == nil || started.confirmationCode.map(Self.isCode) == true else {
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager started the registration without a code to confirm it with; update xign-manager")
        }
        return ProviderRegistration(
            managerURL: url, registrationId: started.registrationId, authorizationURL: started.authorizationUrl,
            customStep: started.customStep, expiresAt: started.expiresAt, confirmationCode: started.confirmationCode,
            waitToken: started.waitToken, signingKey: keys.signing, pin: pin)
    }

    /// A code a person can type: 4 to 12 digits.
    static func isCode(_ code: String) -> Bool {
        (4...12).contains(code.count) && code.allSatisfy { $0.isASCII && $0.isNumber }
    }

    /// A custom provider's step with the person's data (OneWelcome's init and finish challenges).
    public func customStepSynchronous(
        _ registration: ProviderRegistration, step: CustomRegistrationStep, data: String?
    ) throws -> CustomRegistrationStepMessage {
        try ManagerClient(url: registration.managerURL, http: http).post(
            APIPath.customRegistrationSteps,
            CustomRegistrationStepRequest(
                registrationId: registration.registrationId, waitToken: registration.waitToken, step: step, data: data))
    }

    /// The outcome, or `.pending` after at most `waitMilliseconds` (30 s at most), within this client's timeout.
    public func waitForProviderRegistrationSynchronous(
        _ registration: ProviderRegistration, waitMilliseconds: Int64 = 25_000
    ) throws -> ProviderRegistrationResultMessage {
        let client = ManagerClient(url: registration.managerURL, http: http)
        let nonce = Base64URL.encode(try SecureRandom.bytes(16))
        let wait = max(0, min(waitMilliseconds, Int64(http.configuration.timeoutMilliseconds) - 1_000))
        let body = try JSONEncoder.canonical.encode(
            ProviderRegistrationWaitRequest(
                registrationId: registration.registrationId, waitToken: registration.waitToken, nonce: nonce,
                waitMilliseconds: wait))
        return try ManagerClient.verify(
            try client.postSigned(APIPath.providerRegistrationWait, body: body),
            type: SignedAnswerType.providerRegistration, key: registration.signingKey,
            as: ProviderRegistrationResultMessage.self, nonce: nonce, nonceOf: \.nonce)
    }
}

extension Personalizer {
    /// Opens the activation data a registration through an identity provider ended with, with the PIN chosen at its
    /// start.
    public func decryptSynchronous(
        _ result: ProviderRegistrationResultMessage, of registration: Registry.ProviderRegistration
    ) throws -> PersonalizationResponse {
        guard result.outcome == .registered, let link = result.activationLink else {
            throw XignSdkError(.invalidManagerResponse, "the registration holds no activation data")
        }
        return try decryptPersonalizationInitializationDataSynchronous(
            data: try PersonalizationInitializationData(parsing: link), pin: registration.pin)
    }
}
