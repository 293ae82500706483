import XignCrypto

/// The wire's size limits, named once. Each request checks itself against them where the manager decodes it, and
/// each answer where the client verifies it (`LimitedMessage`), so no handler repeats a bound.
public enum WireLimit {
    /// What the manager hands out to name things and to prove a holder: ids of activations, devices, sessions,
    /// confirmations and hosts; activation secrets, join secrets, wait and web session tokens.
    public static let identifier = 64
    /// What a party makes fresh for one exchange: nonces, challenges, grants, authorization codes.
    public static let nonce = 128
    /// The code a host shows for a confirmation: what a request may carry, and the digits the manager draws.
    public static let confirmationCode = 16
    public static let confirmationDigits = 6
    /// A DNS name.
    public static let hostName = 253
    /// A local user's name as a host reports it.
    public static let localUser = 64
    /// A device's name and platform, shown in lists.
    public static let deviceName = 128
    /// An attribute's name and value, and how many one message carries.
    public static let attributeName = 64
    public static let attributeValue = 256
    public static let attributes = 16
    /// Free-form attributes at registration: how many, and a value's length.
    public static let arbitraryAttributes = 32
    public static let arbitraryValue = 1024
    /// How many ids a list names (known devices, confirmations seen).
    public static let idList = 64
    /// Factors in one combination.
    public static let factors = 8
    /// Roles and attributes a service names, categories a manager offers, confirmations and devices it lists.
    public static let roles = 32
    public static let serviceAttributes = 32
    public static let categories = 16
    public static let pendingConfirmations = 32
    public static let accountDevices = 256
    /// The longest PIN.
    public static let pin = 64
    /// A link into the app, as a confirmation carries it.
    public static let appLink = 512
    /// The credential and the secret of an attestation's challenge, as bytes.
    public static let attestationSecret = 1024
    /// A digest of the enrolled fingers: SHA-256 in base64url.
    public static let biometricDigest = 43
    /// An alias, as the user types it.
    public static let alias = 256
    /// Base64url of a DER EK certificate, of a TPM2B_PUBLIC, and of WebAuthn's attestation object and client data.
    public static let endorsementCertificate = 6000
    public static let attestationKey = 1400
    public static let webAuthnField = 4096
}

/// The first field of a message that breaks its limit; the manager answers it with 400 `badRequest`, the client
/// refuses the answer.
public struct LimitViolation: Error, Equatable, CustomStringConvertible {
    public let field: String
    public let rule: String

    public var description: String { "\(field) \(rule)" }
}

/// A message that checks its own fields against `WireLimit`.
public protocol LimitedMessage {
    /// Throws for the first field that is empty where it may not be, too long, or holds what it may not.
    func checkLimits() throws(LimitViolation)
}

/// The checks `checkLimits` is written with; each names the field it reports.
public enum Limit {
    /// At most `maximum` UTF-8 bytes, and not empty unless `allowsEmpty`.
    public static func text(
        _ field: String, _ value: String, maximum: Int, allowsEmpty: Bool = false
    ) throws(LimitViolation) {
        if !allowsEmpty && value.isEmpty { throw LimitViolation(field: field, rule: "is empty") }
        if value.utf8.count > maximum { throw LimitViolation(field: field, rule: "is longer than \(maximum) bytes") }
    }

    /// As `text`, for a field that may be absent.
    public static func text(
        _ field: String, _ value: String?, maximum: Int, allowsEmpty: Bool = false
    ) throws(LimitViolation) {
        if let value { try text(field, value, maximum: maximum, allowsEmpty: allowsEmpty) }
    }

    /// One line a person reads: no control characters, at most `maximum` Unicode scalars (JSON Schema's count).
    public static func line(
        _ field: String, _ value: String, maximum: Int, allowsEmpty: Bool = true
    ) throws(LimitViolation) {
        if !allowsEmpty && value.isEmpty { throw LimitViolation(field: field, rule: "is empty") }
        guard DisplayText.isSafeLine(value, maximumLength: maximum) else {
            throw LimitViolation(field: field, rule: "is longer than \(maximum) characters or holds control characters")
        }
    }

    /// At most `maximum` elements, each checked by `element`.
    public static func list<C: Collection>(
        _ field: String, _ value: C, maximum: Int, element: (C.Element) throws(LimitViolation) -> Void = { _ in }
    ) throws(LimitViolation) {
        if value.count > maximum { throw LimitViolation(field: field, rule: "has more than \(maximum) entries") }
        for item in value { try element(item) }
    }

    /// A SHA-256 digest in base64url, where one is given.
    public static func digest(_ field: String, _ value: String?) throws(LimitViolation) {
        guard let value else { return }
        try require(
            value.utf8.count == WireLimit.biometricDigest && value.utf8.allSatisfy(Base64URL.isAlphabet), field,
            "must be a SHA-256 digest in base64url (\(WireLimit.biometricDigest) characters)")
    }

    /// An id a client keeps in file names and logs: ASCII letters and digits, and `extra`.
    public static func plainIdentifier(
        _ field: String, _ value: String, extra: Set<Unicode.Scalar> = []
    ) throws(LimitViolation) {
        try text(field, value, maximum: WireLimit.identifier)
        try require(
            value.unicodeScalars.allSatisfy {
                $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || extra.contains($0))
            }, field,
            "holds characters other than ASCII letters and digits")
    }

    /// A rule of its own, as `holds`.
    public static func require(_ holds: Bool, _ field: String, _ rule: String) throws(LimitViolation) {
        if !holds { throw LimitViolation(field: field, rule: rule) }
    }
}
