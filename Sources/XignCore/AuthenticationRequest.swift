import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

// What an authentication asks for and how the user answers: roles, attributes, factors (the SDKs' types).

/// A role of the service and the factor combinations it accepts; the PAM service picks one by name.
public struct Role: Sendable, Equatable {
    public let name: String
    public let requestedAuthenticators: [[AuthenticatorType]]
}

/// A name for a stored attribute value: the device chooses among aliases and never sees the value.
public struct PersonalInformationAlias: Sendable, Hashable {
    public let alias: String
    public let isPrimary: Bool
}

/// One attribute a service asks for. Its values stay at the manager; the device sees aliases.
public final class AuthenticationInformation {
    public let name: String
    public let isRequired: Bool
    public let isDataMissing: Bool
    public let aliases: [PersonalInformationAlias]
    public private(set) var value: String?
    public private(set) var selection: PersonalInformationAlias?
    public internal(set) var error: AuthenticationInformationErrorCode = .none

    init(_ message: AuthenticationAttributeMessage) {
        name = message.name
        isRequired = message.isRequired
        isDataMissing = message.isDataMissing
        aliases = message.aliases.map { PersonalInformationAlias(alias: $0.alias, isPrimary: $0.isPrimary) }
        // A single alias needs no choice.
        selection = aliases.count == 1 ? aliases[0] : nil
    }

    /// For missing data: keeps the value only when it is valid.
    @discardableResult
    public func setValue(value: String) -> EmailValidator.ResultCode {
        let result = AttributeValidator.validate(name: name, value: value)
        self.value = result == .valid ? value : nil
        return result
    }

    /// Chooses one of `aliases`; returns nil for an alias from elsewhere.
    @discardableResult
    public func setSelection(_ alias: PersonalInformationAlias) -> PersonalInformationAlias? {
        guard aliases.contains(alias) else { return nil }
        selection = alias
        return alias
    }
}

/// One attribute the service asks for, which the user confirms (an alias) or supplies (missing data).
public final class AuthenticationPersonalInformation {
    public let attributes: [AuthenticationInformation]

    init(_ messages: [AuthenticationAttributeMessage]) { attributes = messages.map(AuthenticationInformation.init) }

    public subscript(name: String) -> AuthenticationInformation? { attributes.first { $0.name == name } }
    public var email: AuthenticationInformation? { self["email"] }
    public var givenName: AuthenticationInformation? { self["givenName"] }
    public var familyName: AuthenticationInformation? { self["familyName"] }
}

/// The manager's answer to a start: roles to choose from and attributes to confirm.
public final class AuthenticateRequest {
    public let roles: [Role]
    public let info: AuthenticationPersonalInformation
    public let relyingPartyName: String
    public private(set) var selection: Role?
    let session: AuthenticationSession

    init(start: AuthenticationStartMessage, session: AuthenticationSession) {
        roles = start.roles.map { Role(name: $0.name, requestedAuthenticators: $0.requestedAuthenticators) }
        info = AuthenticationPersonalInformation(start.attributes)
        relyingPartyName = start.relyingPartyName
        selection = roles.count == 1 ? roles[0] : nil
        self.session = session
    }

    /// Selects one of `roles`; returns nil for a role from elsewhere.
    @discardableResult
    public func setSelection(_ role: Role) -> Role? {
        guard roles.contains(role) else { return nil }
        selection = role
        return role
    }
}

/// What an authentication needs across its steps.
final class AuthenticationSession {
    let purpose: AuthenticationPurpose
    /// The local account the authentication is for, and the host it logs in to.
    let localUser: String
    let host: String
    let entity: IdentityManagerEntity
    let managerKey: P256PublicKey
    /// What the finish's PIN is sealed to: from the start answer, which the pinned key signed.
    let pinSealingKey: P256PublicKey
    /// Loaded once for the start; the finish signs with it too.
    let deviceKey: any DeviceKey
    let authenticationId: String
    var challenge: String
    let fingerprints: FingerprintReader
    /// This session wrote a lock to the state file (a wrong PIN), so a right PIN afterwards must forget it.
    var recordedLockout = false

    init(
        purpose: AuthenticationPurpose, localUser: String, host: String, entity: IdentityManagerEntity,
        managerKey: P256PublicKey,
        pinSealingKey: P256PublicKey, deviceKey: any DeviceKey, authenticationId: String, challenge: String,
        fingerprints: FingerprintReader
    ) {
        self.fingerprints = fingerprints
        self.deviceKey = deviceKey
        self.purpose = purpose
        self.localUser = localUser
        self.host = host
        self.entity = entity
        self.managerKey = managerKey
        self.pinSealingKey = pinSealingKey
        self.authenticationId = authenticationId
        self.challenge = challenge
    }
}

/// Whether the attributes are complete enough to sign; checked here first, so a round trip is not spent on it.
public enum PrepareAuthenticationUserInformationResult {
    /// The request again, with `error` set on each attribute to correct.
    case failure(AuthenticateRequest)
    case success(AuthenticationUserInformation)
}

/// A factor to sign an authentication with.
public protocol AuthenticationFactor {
    var type: AuthenticatorType { get }
}

/// Possession of this machine's device key.
public struct DeviceFactor: AuthenticationFactor {
    public var type: AuthenticatorType { .device }
    public init() {}
}

/// Knowledge of the PIN; only the manager checks it.
public struct PinFactor: AuthenticationFactor {
    public var type: AuthenticatorType { .pin }
    let pin: String
    public init(_ pin: String) { self.pin = pin }
}

/// A finger on fprintd's reader, matched against the local user's enrolled fingers when the factor is signed.
public struct BiometricFactor: AuthenticationFactor {
    public var type: AuthenticatorType { .biometric }
    /// Gets what to tell the user: touch the reader, or try again.
    let prompt: (String) -> Void
    public init(prompt: @escaping (String) -> Void = { _ in }) { self.prompt = prompt }
}

/// The confirmed request, to be signed with one alternative of `requestedAuthenticators`.
public final class AuthenticationUserInformation {
    public let requestedAuthenticators: [[AuthenticatorType]]
    let request: AuthenticateRequest
    let role: Role
    private(set) var factors: [AuthenticatorType] = []
    private(set) var pin: String?
    /// With the biometric factor: the digest of the user's enrolled fingers now, for the manager to compare.
    private(set) var biometricEnrolment: String?
    /// The enrolled fingers differ from those the factor was added with, so no finger was read: the finish only
    /// tells the manager, which removes the factor.
    private(set) var fingersChanged = false

    init(request: AuthenticateRequest, role: Role) {
        self.request = request
        self.role = role
        requestedAuthenticators = role.requestedAuthenticators
    }

    public func sign(factor: any AuthenticationFactor) throws {
        switch factor {
        case is DeviceFactor:
            break
        case let pinFactor as PinFactor:
            guard !pinFactor.pin.isEmpty, pinFactor.pin.utf8.count <= WireLimit.pin else {
                throw XignSdkError(.invalidInput, "the PIN must have 1 to 64 characters")
            }
            pin = pinFactor.pin
        case let biometric as BiometricFactor where request.session.entity.factors.contains(.biometric):
            let session = request.session
            let enrolment = try session.fingerprints.boundEnrolment(user: session.localUser)
            if let recorded = session.entity.biometricEnrolment, let enrolment,
                !constantTimeEquals(Data(recorded.utf8), Data(enrolment.utf8))
            {
                fingersChanged = true
            } else {
                try session.fingerprints.check(user: session.localUser, prompt: biometric.prompt)
            }
            biometricEnrolment = enrolment
        default:
            throw XignSdkError(
                .invalidInput,
                "this device has no \(factor.type.rawValue) factor enrolled; use another combination of \(requestedAuthenticators.map { $0.map(\.rawValue).joined(separator: "+") })"
            )
        }
        if !factors.contains(factor.type) { factors.append(factor.type) }
    }

    /// Signatures are spent after a lockout; the next attempt signs again.
    func clearSignatures() {
        factors = []
        pin = nil
    }
}
