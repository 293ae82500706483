import ArgumentParser

/// xign-setup's exit statuses, as the README lists them; 0 is `.success`, 1 `.failure` and 64 `.validationFailure`.
extension ExitCode {
    /// The activation is locked after wrong PINs; the message says until when.
    static let lockedOut = ExitCode(2)
    /// The manager cannot be reached (or timed out, or TLS failed).
    static let managerUnreachable = ExitCode(3)
    /// The manager requires a stronger device key.
    static let securityInsufficient = ExitCode(4)
    /// The manager rejected the registration's attributes.
    static let registrationRejected = ExitCode(5)
}
