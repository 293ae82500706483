import FoundationEssentials

/// Machine-readable error codes of the manager's API. Unknown codes from a newer manager decode as `.unknown`.
public enum WireErrorCode: String, Codable, Sendable, CaseIterable {
    case badRequest
    case payloadTooLarge
    case notFound
    case activationNotFound
    case activationRevoked
    case lockedOut
    case pinPolicy
    case registrationRejected
    case attributesRejected
    case sessionInvalid
    case challengeInvalid
    case signatureInvalid
    case securityInsufficient
    case deviceNotFound
    case internalError
    /// No account has the login name a host asked for.
    case unknownLogin
    /// Too many confirmations are pending for the account, or one was denied a moment ago.
    case tooManyRequests
    /// The account may not log in to the host that asks (host groups).
    case hostNotAllowed
    /// The code typed for a login confirmation is not the one the host showed.
    case wrongCode
    /// The request conflicts with what the manager holds, such as a host name that has joined already.
    case conflict
    /// Self-registration is switched off at this manager; accounts come from its administrator.
    case registrationClosed
    /// The manager cannot answer now (another check of the same activation holds it); try again shortly.
    case busy
    /// The user's enrolled fingers changed since the biometric factor was added, so it was removed (Nevis's
    /// keyDisappearedPermanently); add it again.
    case biometricInvalidated
    /// An administrator locked the account; nothing logs in with it until they unlock it.
    case accountLocked
    /// The host's user of that login name is not the account's own user (another uid), and the account may not be the
    /// hosts' local users.
    case localUserMismatch
    /// The organization's identity provider cannot be reached or answered what OpenID Connect does not define.
    case providerUnavailable
    case unknown

    public init(from decoder: any Decoder) throws {
        let raw = try decoder.singleValueContainer().decode(String.self)
        self = WireErrorCode(rawValue: raw) ?? .unknown
    }
}

/// The body of every non-2xx answer: `{"error": {...}}`.
public struct ErrorBody: Codable, Equatable, Sendable {
    public struct Detail: Codable, Equatable, Sendable {
        public var code: WireErrorCode
        /// For people: says what went wrong and what to do.
        public var message: String
        /// registrationRejected: the verdict for each attribute ("pin" and "alias" included).
        public var attributes: [String: AttributeErrorCode]?
        /// pinPolicy: the PinValidator code.
        public var pinError: String?
        /// lockedOut: the pending lock.
        public var lockout: LockoutMessage?
        /// attributesRejected: the verdict for each attribute of an authentication.
        public var authenticationAttributes: [String: AuthenticationAttributeErrorCode]?

        public init(
            code: WireErrorCode, message: String, attributes: [String: AttributeErrorCode]? = nil,
            pinError: String? = nil, lockout: LockoutMessage? = nil,
            authenticationAttributes: [String: AuthenticationAttributeErrorCode]? = nil
        ) {
            self.code = code
            self.message = message
            self.attributes = attributes
            self.pinError = pinError
            self.lockout = lockout
            self.authenticationAttributes = authenticationAttributes
        }
    }

    public var error: Detail

    public init(_ error: Detail) { self.error = error }
}
