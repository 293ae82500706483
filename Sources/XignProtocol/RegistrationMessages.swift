import FoundationEssentials

public struct PinPolicyMessage: Codable, Equatable, Sendable {
    public var minLength: Int
    public var maxLength: Int
    public var digitsOnly: Bool
    /// The longest allowed run of consecutive ascending or descending digits (e.g. 3 allows "123", refuses "1234").
    public var maxSequenceLength: Int
    /// The longest allowed run of one repeated digit (e.g. 2 allows "11", refuses "111").
    public var maxSimilarDigits: Int
    public var blacklist: [String]

    public init(
        minLength: Int, maxLength: Int, digitsOnly: Bool, maxSequenceLength: Int, maxSimilarDigits: Int,
        blacklist: [String]
    ) {
        self.minLength = minLength
        self.maxLength = maxLength
        self.digitsOnly = digitsOnly
        self.maxSequenceLength = maxSequenceLength
        self.maxSimilarDigits = maxSimilarDigits
        self.blacklist = blacklist
    }
}

public struct AliasPolicyMessage: Codable, Equatable, Sendable {
    public var minLength: Int
    public var maxLength: Int

    public init(minLength: Int, maxLength: Int) {
        self.minLength = minLength
        self.maxLength = maxLength
    }
}

public struct AttributeMessage: Codable, Equatable, Sendable {
    public var name: String
    public var isRequired: Bool

    public init(name: String, isRequired: Bool) {
        self.name = name
        self.isRequired = isRequired
    }
}

public struct CategoryMessage: Codable, Equatable, Sendable {
    public var id: String
    /// anonymous, email, phone, idCard.
    public var types: [String]
    public var attributes: [AttributeMessage]
    public var identificationAttributes: [String]

    public init(id: String, types: [String], attributes: [AttributeMessage], identificationAttributes: [String]) {
        self.id = id
        self.types = types
        self.attributes = attributes
        self.identificationAttributes = identificationAttributes
    }
}

public struct RegistrationParametersMessage: Codable, Equatable, Sendable {
    public var pinSpec: PinPolicyMessage
    public var categories: [CategoryMessage]
    public var alias: AliasPolicyMessage
    /// Echoed when the request named a linked service the manager knows; nil otherwise.
    public var serviceMappingId: String?

    public init(
        pinSpec: PinPolicyMessage, categories: [CategoryMessage], alias: AliasPolicyMessage, serviceMappingId: String?
    ) {
        self.pinSpec = pinSpec
        self.categories = categories
        self.alias = alias
        self.serviceMappingId = serviceMappingId
    }
}

public struct RegisterRequest: Codable, Equatable, Sendable {
    public var categoryId: String
    /// Bound to `PINBinding.registration`.
    public var sealedPin: SealedPINMessage
    public var attributes: [String: String]
    public var alias: String?
    public var serviceMappingId: String?
    public var arbitraryUserAttributes: [String: String]?

    public init(
        categoryId: String, sealedPin: SealedPINMessage, attributes: [String: String], alias: String?,
        serviceMappingId: String?, arbitraryUserAttributes: [String: String]?
    ) {
        self.categoryId = categoryId
        self.sealedPin = sealedPin
        self.attributes = attributes
        self.alias = alias
        self.serviceMappingId = serviceMappingId
        self.arbitraryUserAttributes = arbitraryUserAttributes
    }
}

public struct RegisterResponse: Codable, Equatable, Sendable {
    public var managerUrl: String
    public var activationAlias: String

    public init(managerUrl: String, activationAlias: String) {
        self.managerUrl = managerUrl
        self.activationAlias = activationAlias
    }
}

/// Per-attribute server verdicts, as RegistrationInformation.error in the SDKs.
public enum AttributeErrorCode: String, Codable, Sendable, CaseIterable {
    case none, invalid, notAvailable, required
}

extension RegistrationParametersMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.require(
            pinSpec.minLength >= 1 && pinSpec.minLength <= pinSpec.maxLength && pinSpec.maxLength <= WireLimit.pin,
            "pinSpec",
            "has PIN lengths that do not fit (1 ≤ minLength ≤ maxLength ≤ \(WireLimit.pin))")
        try Limit.require(!categories.isEmpty, "categories", "is empty")
        try Limit.list("categories", categories, maximum: WireLimit.categories)
    }
}

extension RegisterRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.list(
            "arbitraryUserAttributes", arbitraryUserAttributes ?? [:], maximum: WireLimit.arbitraryAttributes
        ) {
            (entry) throws(LimitViolation) in
            try Limit.line(
                "a key of arbitraryUserAttributes", entry.key, maximum: WireLimit.attributeName, allowsEmpty: false)
            try Limit.line("arbitraryUserAttributes[\(entry.key)]", entry.value, maximum: WireLimit.arbitraryValue)
        }
        try Limit.require(
            serviceMappingId.map { IdentifierValidator.isValid($0) } ?? true, "serviceMappingId",
            "must be 1 to 64 printable ASCII characters without spaces")
    }
}
