import FoundationEssentials

// The manager's HTTP API, version 1. docs/protocol.md describes each message; docs/openapi.yaml is the schema.
// Times on the wire are milliseconds since the Unix epoch.

public enum APIPath {
    public static let health = "/health"
    public static let registrationParameters = "/v1/registration/parameters"
    public static let registrations = "/v1/registrations"
    public static let personalizationDecrypt = "/v1/personalization/decrypt"
    public static let personalizations = "/v1/personalizations"
    public static let challenges = "/v1/challenges"
    public static let deviceRevocations = "/v1/devices/revoke"
}

/// The media type of a signed (JWS) answer.
public enum SignedAnswerType {
    public static let decrypt = "xign-decrypt+jwt"
    public static let personalization = "xign-personalization+jwt"
    public static let revocation = "xign-revocation+jwt"
    public static let pinSealingKey = "xign-pin-sealing-key+jwt"
}

extension APIPath {
    /// What the web app's script calls, by the names above; the pages hand them to it (XignWeb's `WebSite`).
    public static let calledByTheWebApp: [String: String] = [
        "health": health, "challenges": challenges, "personalizationDecrypt": personalizationDecrypt,
        "passkeyPersonalizations": passkeyPersonalizations, "confirmationView": confirmationView,
        "confirmationApproval": confirmationApproval, "confirmationDenial": confirmationDenial,
        "authentications": authentications, "authenticationFinish": authenticationFinish, "apiAccess": apiAccess,
        "webPending": webPending, "webDevices": webDevices, "webSessions": webSessions,
        "consoleSessions": consoleSessions, "consoleSessionEnd": consoleSessionEnd, "consoleActions": consoleActions,
        "identityProviders": identityProviders, "providerRegistrations": providerRegistrations,
        "providerRegistrationConfirmation": providerRegistrationConfirmation,
        "registrationCancellations": registrationCancellations,
    ]
}
