import FoundationEssentials

// Registration through the organization's identity provider (OneWelcome's browser identity provider): the client
// chooses the activation PIN and an alias, the person signs in at the provider in a browser, and the client receives
// the activation data, signed, without a mail (docs/protocol.md, "Registration through an identity provider").

extension APIPath {
    /// GET: the identity providers and the default one (OneWelcome's `identityProviders`).
    public static let identityProviders = "/v1/registrations/identity-providers"
    /// POST: starts a registration through a provider; the answer names the URL to open.
    public static let providerRegistrations = "/v1/registrations/identity-provider"
    /// GET: where the provider sends the browser back (the OpenID Connect redirect URI).
    public static let providerRegistrationCallback = "/v1/registrations/identity-provider/callback"
    /// POST: the client waits here for the outcome.
    public static let providerRegistrationWait = "/v1/registrations/identity-provider/wait"
    /// POST: the browser that came back from the provider sends the code the start showed (or cancels).
    public static let providerRegistrationConfirmation = "/v1/registrations/identity-provider/confirmation"
    /// POST: the "not me" link of a registration's notice mail cancels the activation it made.
    public static let registrationCancellations = "/v1/registrations/cancellations"
}

extension SignedAnswerType {
    public static let providerRegistration = "xign-provider-registration+jwt"
}

public struct IdentityProviderMessage: Codable, Equatable, Sendable {
    public var id: String
    public var name: String
    /// "browser": the person signs in at the provider's page.
    public var type: String
    public init(id: String, name: String, type: String) { (self.id, self.name, self.type) = (id, name, type) }
}

public struct IdentityProvidersMessage: Codable, Equatable, Sendable {
    public var identityProviders: [IdentityProviderMessage]
    public var defaultIdentityProvider: String?
    public init(identityProviders: [IdentityProviderMessage], defaultIdentityProvider: String?) {
        (self.identityProviders, self.defaultIdentityProvider) = (identityProviders, defaultIdentityProvider)
    }
}

public struct ProviderRegistrationRequest: Codable, Equatable, Sendable {
    /// nil: the default provider.
    public var identityProvider: String?
    /// The activation PIN, bound to `PINBinding.providerRegistration(provider:nonce:)`.
    public var sealedPin: SealedPINMessage
    public var alias: String?
    public var nonce: String
    /// The web app's registration: the browser that comes back from the provider is sent on to the activation link
    /// (the personalization page), instead of a client waiting for it.
    public var continueInBrowser: Bool?
    public init(
        identityProvider: String?, sealedPin: SealedPINMessage, alias: String?, nonce: String,
        continueInBrowser: Bool? = nil
    ) {
        (self.identityProvider, self.sealedPin, self.alias, self.nonce, self.continueInBrowser) =
            (identityProvider, sealedPin, alias, nonce, continueInBrowser)
    }
}

public struct ProviderRegistrationStartMessage: Codable, Equatable, Sendable {
    public var registrationId: String
    /// A browser provider's: open it in a browser, the provider's sign-in.
    public var authorizationUrl: String?
    /// A custom provider's: the step the client sends data for next (`/v1/registrations/identity-provider/custom`).
    public var customStep: CustomRegistrationStep?
    /// Only the client that started the registration holds it; the outcome is given for it alone.
    public var waitToken: String
    public var expiresAt: Int64
    /// A browser provider's, from a client that waits (not the web app): the code the person who signs in types at
    /// the manager's page afterwards, so that a sign-in link sent to someone else makes no account for the sender.
    public var confirmationCode: String?
    public init(
        registrationId: String, authorizationUrl: String?, customStep: CustomRegistrationStep? = nil,
        waitToken: String, expiresAt: Int64, confirmationCode: String? = nil
    ) {
        (self.registrationId, self.authorizationUrl, self.customStep, self.waitToken, self.expiresAt) =
            (registrationId, authorizationUrl, customStep, waitToken, expiresAt)
        self.confirmationCode = confirmationCode
    }
}

/// The browser that signed in at the provider: the code the start showed, or `cancel` (this is not mine). Its cookie
/// names the registration.
public struct ProviderRegistrationConfirmationRequest: Codable, Equatable, Sendable {
    public var code: String?
    public var cancel: Bool?
    public init(code: String?, cancel: Bool? = nil) { (self.code, self.cancel) = (code, cancel) }
}

public struct ProviderRegistrationConfirmationMessage: Codable, Equatable, Sendable {
    public var outcome: ProviderRegistrationOutcome
    /// What the page shows: where the activation goes on, or why it ended.
    public var message: String
    public init(outcome: ProviderRegistrationOutcome, message: String) {
        (self.outcome, self.message) = (outcome, message)
    }
}

/// The token of a "not me" link, from the fragment of its page.
public struct RegistrationCancellationRequest: Codable, Equatable, Sendable {
    public var token: String
    public init(token: String) { self.token = token }
}

public struct RegistrationCancellationMessage: Codable, Equatable, Sendable {
    public var message: String
    public init(message: String) { self.message = message }
}

extension ProviderRegistrationConfirmationRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("code", code, maximum: 32, allowsEmpty: true)
    }
}

extension RegistrationCancellationRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("token", token, maximum: WireLimit.nonce)
    }
}

extension APIPath {
    /// POST: a custom provider's step, with the data the person gave (OneWelcome's init and finish challenges).
    public static let customRegistrationSteps = "/v1/registrations/identity-provider/custom"
}

/// A custom provider's steps: an optional init step, then the finish step.
public enum CustomRegistrationStep: String, Codable, Sendable {
    case `init`, finish
}

public struct CustomRegistrationStepRequest: Codable, Equatable, Sendable {
    public var registrationId: String
    public var waitToken: String
    public var step: CustomRegistrationStep
    /// What the person typed for this step; optional, as in the SDK.
    public var data: String?
    public init(registrationId: String, waitToken: String, step: CustomRegistrationStep, data: String?) {
        (self.registrationId, self.waitToken, self.step, self.data) = (registrationId, waitToken, step, data)
    }
}

public struct CustomRegistrationStepMessage: Codable, Equatable, Sendable {
    /// `pending`: send the next step (`nextStep`); `registered` or `refused`: the outcome is at the wait.
    public var outcome: ProviderRegistrationOutcome
    public var nextStep: CustomRegistrationStep?
    /// The service's text for the person (OneWelcome's CustomInfo).
    public var info: String?
    public var message: String?
    public init(outcome: ProviderRegistrationOutcome, nextStep: CustomRegistrationStep? = nil, info: String? = nil) {
        (self.outcome, self.nextStep, self.info) = (outcome, nextStep, info)
    }
}

extension CustomRegistrationStepRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("registrationId", registrationId, maximum: WireLimit.identifier)
        try Limit.text("waitToken", waitToken, maximum: WireLimit.nonce)
        if let data { try Limit.line("data", data, maximum: 1024) }
    }
}

public struct ProviderRegistrationWaitRequest: Codable, Equatable, Sendable {
    public var registrationId: String
    public var waitToken: String
    public var nonce: String
    /// How long the manager may hold the answer while the person is still at the provider (at most 30 s).
    public var waitMilliseconds: Int64
    public init(registrationId: String, waitToken: String, nonce: String, waitMilliseconds: Int64) {
        (self.registrationId, self.waitToken, self.nonce, self.waitMilliseconds) =
            (registrationId, waitToken, nonce, waitMilliseconds)
    }
}

public enum ProviderRegistrationOutcome: String, Codable, Sendable {
    /// The person has not come back from the provider yet: wait again.
    case pending
    /// The account exists; `activationLink` is its activation data, given once.
    case registered
    /// The provider or its answer was refused; `message` says why and what to do. No account was made.
    case refused
}

public struct ProviderRegistrationResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var registrationId: String
    public var outcome: ProviderRegistrationOutcome
    public var message: String?
    public var email: String?
    public var loginName: String?
    /// The activation data as the mail's link writes it (`PersonalizationPayload.appLink`), given once.
    public var activationLink: String?
    public init(nonce: String, registrationId: String, outcome: ProviderRegistrationOutcome) {
        (self.nonce, self.registrationId, self.outcome) = (nonce, registrationId, outcome)
    }
}

extension ProviderRegistrationRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("identityProvider", identityProvider, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("alias", alias, maximum: WireLimit.alias, allowsEmpty: true)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}

extension ProviderRegistrationWaitRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("registrationId", registrationId, maximum: WireLimit.identifier)
        try Limit.text("waitToken", waitToken, maximum: WireLimit.nonce)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}
