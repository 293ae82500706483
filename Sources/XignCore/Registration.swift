import FoundationEssentials
import XignProtocol

/// Checks a PIN against the manager's policy before it leaves the machine, so the user hears why at once.
public enum PinValidator {
    /// The SDKs' name for a PIN's verdict.
    public typealias ResultCode = PinValidationResult
}

extension EmailValidator {
    /// The SDKs' name for an address's verdict.
    public typealias ResultCode = EmailValidationResult
}

/// The PIN rules of a manager, and the PIN once it passes them.
public final class PinSpecification {
    let policy: PinPolicyMessage
    public var minLength: Int { policy.minLength }
    public var maxLength: Int { policy.maxLength }
    public var isDigitsOnly: Bool { policy.digitsOnly }
    public var maxSequenceLength: Int { policy.maxSequenceLength }
    public var maxSimilarDigits: Int { policy.maxSimilarDigits }
    private(set) var pin: String?

    init(_ policy: PinPolicyMessage) { self.policy = policy }

    /// Keeps the PIN only when it is valid; any other result clears it.
    @discardableResult
    public func setPin(_ pin: String) -> PinValidator.ResultCode {
        let result = policy.validate(pin)
        self.pin = result == .valid ? pin : nil
        return result
    }

    /// A message for a person, naming the rule that was broken.
    public func explain(_ result: PinValidator.ResultCode) -> String {
        switch result {
        case .valid: return "PIN accepted"
        case .empty: return "The PIN must not be empty."
        case .onlyNumbers: return "Only digits are allowed in the PIN."
        case .tooShort: return "The PIN needs at least \(minLength) digits."
        case .tooLong: return "The PIN may have at most \(maxLength) digits."
        case .blacklisted: return "This PIN is too common; choose another."
        case .sequence:
            return "The PIN must not contain more than \(maxSequenceLength) consecutive ascending or descending digits."
        case .similarDigits: return "The PIN must not repeat a digit more than \(maxSimilarDigits) times in a row."
        case .unsupportedCharacter:
            return
                "Use only letters, digits and symbols of a US keyboard in the PIN, so every login screen can type it."
        }
    }
}

/// Checks an alias locally: it is shown in every PIN prompt, so it must be printable and short.
public struct AliasValidator: Sendable {
    /// The SDKs' name for an alias's verdict.
    public typealias ResultCode = AliasValidationResult
    let policy: AliasPolicyMessage
    public var minLength: Int { policy.minLength }
    public var maxLength: Int { policy.maxLength }

    public func validate(_ alias: String) -> ResultCode { policy.validate(alias) }

    public func explain(_ result: ResultCode) -> String {
        switch result {
        case .valid: return "alias accepted"
        case .empty: return "The alias must not be empty."
        case .tooShort: return "The alias needs at least \(minLength) characters."
        case .tooLong: return "The alias may have at most \(maxLength) characters."
        case .invalid: return "The alias may not hold control characters; type it as plain text."
        }
    }
}

/// The manager's verdict on one attribute.
public typealias RegistrationInformationErrorCode = AttributeErrorCode

/// One attribute of a registration: its rules, its value and the manager's verdict.
public final class RegistrationInformation {
    public let name: String
    public let isRequired: Bool
    public private(set) var value: String?
    /// Set from the manager's answer after a failed registration.
    public internal(set) var error: RegistrationInformationErrorCode = .none

    init(name: String, isRequired: Bool) {
        self.name = name
        self.isRequired = isRequired
    }

    /// Keeps the value only when it is valid; any other result clears it.
    @discardableResult
    public func setValue(value: String) -> EmailValidator.ResultCode {
        let result = AttributeValidator.validate(name: name, value: value)
        self.value = result == .valid ? value : nil
        if result == .valid { error = .none }
        return result
    }
}

/// The attributes a category asks for.
public final class RegistrationPersonalInformation {
    public let attributes: [RegistrationInformation]

    init(_ attributes: [AttributeMessage]) {
        self.attributes = attributes.map { RegistrationInformation(name: $0.name, isRequired: $0.isRequired) }
    }

    public subscript(name: String) -> RegistrationInformation? { attributes.first { $0.name == name } }
    public var email: RegistrationInformation? { self["email"] }
    public var givenName: RegistrationInformation? { self["givenName"] }
    public var familyName: RegistrationInformation? { self["familyName"] }
}

/// How a registration category identifies the person (the SDKs' identification types).
public enum IdentificationType: String, Sendable, CaseIterable {
    case anonymous, email, phone, idCard
}

/// One way to register offered by the manager, with the attributes it asks for.
public final class IdentificationCategory {
    public let id: String
    public let types: Set<IdentificationType>
    public let info: RegistrationPersonalInformation
    public let identificationAttributes: [String]

    init(_ message: CategoryMessage) {
        id = message.id
        types = Set(message.types.compactMap(IdentificationType.init(rawValue:)))
        info = RegistrationPersonalInformation(message.attributes)
        identificationAttributes = message.identificationAttributes
    }
}

/// What a registration needs, as the manager configured it; filled in by the caller, then sent with `register`.
public final class RegistrationParameters {
    public let managerURL: ManagerURL
    public let pinSpec: PinSpecification
    public let categories: [IdentificationCategory]
    public let validatorAlias: AliasValidator
    public let serviceMappingId: String?
    public private(set) var selection: IdentificationCategory?
    public private(set) var alias: String?
    public private(set) var arbitraryUserAttributes: [String: String]?
    /// After a failed registration: why the PIN was refused, if it was.
    public internal(set) var pinError: PinValidator.ResultCode?
    /// After a failed registration: the manager's verdict on the alias, if it refused it.
    public internal(set) var aliasError: AttributeErrorCode?

    init(managerURL: ManagerURL, message: RegistrationParametersMessage) {
        self.managerURL = managerURL
        pinSpec = PinSpecification(message.pinSpec)
        categories = message.categories.map(IdentificationCategory.init)
        validatorAlias = AliasValidator(policy: message.alias)
        serviceMappingId = message.serviceMappingId
        selection = categories.count == 1 ? categories[0] : nil
    }

    /// Selects one of `categories`; returns false for a category from elsewhere.
    @discardableResult
    public func setSelection(_ category: IdentificationCategory) -> Bool {
        guard categories.contains(where: { $0 === category }) else { return false }
        selection = category
        return true
    }

    @discardableResult
    public func setAlias(_ alias: String) -> AliasValidator.ResultCode {
        let result = validatorAlias.validate(alias)
        self.alias = result == .valid ? alias : nil
        return result
    }

    /// Kept by the manager only for a linked service (a serviceMappingId it knows), until the first personalization.
    public func setArbitraryUserAttributes(_ attributes: [String: String]) {
        arbitraryUserAttributes = attributes
    }
}

/// Success with where the activation data went, or the attributes the manager refused and why.
public enum RegistrationResponse {
    case success(managerUrl: String)
    /// The same parameters, with `error` set on each attribute the manager refused.
    case failure(RegistrationParameters)
}

/// Registration at a manager (the SDKs' Registry).
public struct Registry: Sendable {
    let http: HTTPClient

    public func initializationSynchronous(
        url: ManagerURL, serviceMappingId: String? = nil
    ) throws -> RegistrationParameters {
        let client = ManagerClient(url: url, http: http)
        let query = serviceMappingId.map { "?serviceMappingId=" + PercentEncoding.encode($0) } ?? ""
        let message: RegistrationParametersMessage = try client.get(APIPath.registrationParameters, query: query)
        return RegistrationParameters(managerURL: url, message: message)
    }

    public func registerSynchronous(data parameters: RegistrationParameters) throws -> RegistrationResponse {
        guard let category = parameters.selection else {
            throw XignSdkError(.parametersIncomplete, "no identification category is selected")
        }
        guard let pin = parameters.pinSpec.pin else {
            throw XignSdkError(.parametersIncomplete, "the activation PIN is not set (or was not valid)")
        }
        var attributes: [String: String] = [:]
        for info in category.info.attributes {
            if let value = info.value {
                attributes[info.name] = value
            } else if info.isRequired {
                throw XignSdkError(.parametersIncomplete, "the required attribute \(info.name) is not set")
            }
        }
        let client = ManagerClient(url: parameters.managerURL, http: http)
        // Nothing is pinned before the first activation data, so the key is the one the manager names over TLS.
        let keys = try client.managerKeys(pinnedTo: nil)
        let binding = PINBinding.registration(categoryId: category.id)
        let request = RegisterRequest(
            categoryId: category.id, sealedPin: try ManagerClient.seal(pin, to: keys.sealing, for: binding),
            attributes: attributes,
            alias: parameters.alias, serviceMappingId: parameters.serviceMappingId,
            arbitraryUserAttributes: parameters.arbitraryUserAttributes
        )
        do {
            let response: RegisterResponse = try client.post(APIPath.registrations, request)
            return .success(managerUrl: response.managerUrl)
        } catch let error as XignSdkError {
            guard let rejection = error.rejection else { throw error }
            for info in category.info.attributes { info.error = rejection.attributes[info.name] ?? .none }
            parameters.pinError = rejection.pinError
            parameters.aliasError = rejection.attributes["alias"]
            return .failure(parameters)
        }
    }
}

/// The fields of a registration the manager refused; Registry turns them into `.failure(parameters)`.
struct RegistrationRejection: Sendable {
    let attributes: [String: AttributeErrorCode]
    let pinError: PinValidationResult?

    init(_ detail: ErrorBody.Detail) {
        attributes = detail.attributes ?? [:]
        pinError = detail.pinError.flatMap(PinValidationResult.init(rawValue:))
    }
}
