import FoundationEssentials
import XignCrypto
import XignProtocol

/// The SDKs' name, so a front end needs only XignCore to start a process.
public typealias ApiAccessProcess = XignProtocol.ApiAccessProcess

/// What every api access result carries: the manager's grant and the enrolment it was given to.
struct ApiAccessGrant {
    let message: ApiAccessGrantMessage
    let entity: IdentityManagerEntity
    let managerKey: P256PublicKey
    /// On the monotonic clock, like the authorization code's.
    let expiresAt: MonotonicClock.Instant

    init(_ message: ApiAccessGrantMessage, session: AuthenticationSession, sentAt: MonotonicClock.Instant) throws {
        guard let lifetime = MonotonicClock.lifetime(from: message.issuedAt, to: message.expiresAt) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's api access grant has no usable lifetime")
        }
        self.message = message
        entity = session.entity
        managerKey = session.managerKey
        expiresAt = sentAt.advanced(by: lifetime)
    }

    func result() throws -> ApiAccessAuthenticationResult {
        func policy<T>(_ value: T?) throws -> T {
            guard let value else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager's \(message.process.rawValue) grant lacks its policy")
            }
            return value
        }
        switch message.process {
        case .changePin:
            return .apiAccessChangePin(ApiAccessChangePin(grant: self, pinSpec: try policy(message.pinSpec)))
        case .requestNewActivation:
            return .apiAccessRequestNewActivationData(
                ApiAccessRequestNewActivationData(
                    grant: self, pinSpec: try policy(message.pinSpec), aliasSpec: try policy(message.aliasSpec),
                    canSendEmail: message.canSendEmail ?? false))
        case .delete: return .apiAccessDelete(ApiAccessDelete(grant: self))
        case .addFactor: return .apiAccessAddFactor(ApiAccessAddFactor(grant: self))
        case .revokeDevice: return .apiAccessRevokeDevice(ApiAccessRevokeDevice(grant: self))
        case .console:
            throw XignSdkError(
                .invalidManagerResponse,
                "the manager answered with a console grant, which only the console's page opens")
        }
    }
}

/// A change of PIN the user confirmed with the current one. Set the new PIN on `pinSpec`.
public final class ApiAccessChangePin {
    public let pinSpec: PinSpecification
    public var idmIdentifier: String { grant.entity.idmIdentifier }
    let grant: ApiAccessGrant

    init(grant: ApiAccessGrant, pinSpec: PinPolicyMessage) {
        self.grant = grant
        self.pinSpec = PinSpecification(pinSpec)
    }
}

/// A request for another activation of the account (the SDKs' NewActivationTrigger, after the authentication).
public final class ApiAccessRequestNewActivationData: NewActivationChoices {
    public var idmIdentifier: String { grant.entity.idmIdentifier }
    let grant: ApiAccessGrant

    init(grant: ApiAccessGrant, pinSpec: PinPolicyMessage, aliasSpec: AliasPolicyMessage, canSendEmail: Bool) {
        self.grant = grant
        super.init(pinSpec: pinSpec, aliasSpec: aliasSpec, canSendEmail: canSendEmail)
    }
}

/// The deletion of the account, confirmed with device and PIN.
public struct ApiAccessDelete {
    public var idmIdentifier: String { grant.entity.idmIdentifier }
    public var accountEmail: String { grant.entity.accountEmail }
    let grant: ApiAccessGrant
}

/// Adding a factor to this device, confirmed with device and PIN.
public struct ApiAccessAddFactor {
    public var idmIdentifier: String { grant.entity.idmIdentifier }
    let grant: ApiAccessGrant
}

/// Removing another device of the account (a lost one), confirmed with device and PIN.
public struct ApiAccessRevokeDevice {
    public var idmIdentifier: String { grant.entity.idmIdentifier }
    let grant: ApiAccessGrant
}

/// The activation data of the new activation, for the other machine.
public struct NewActivationData: Sendable, Equatable {
    public let activationId: String
    public let alias: String
    public let payload: PersonalizationPayload
    public let mailQueued: Bool
}

extension Personalizer {
    /// Sets the new PIN for every activation of the account; returns how many that is.
    public func finishChangePin(request: ApiAccessChangePin) throws -> Int {
        guard let pin = request.pinSpec.pin else {
            throw XignSdkError(.parametersIncomplete, "set a valid new PIN on pinSpec first")
        }
        let grant = request.grant
        let sealed = try ManagerClient.seal(
            pin, to: try ManagerClient.pinSealingKey(grant.message.pinSealingKey), for: .grant(grant.message.grant))
        let result = try finish(
            grant, ApiAccessRequest(grant: grant.message.grant, nonce: try ManagerClient.nonce(), sealedNewPin: sealed))
        guard let count = result.activationsWithNewPin, count >= 1 else {
            throw XignSdkError(.invalidManagerResponse, "the manager's PIN change answer is inconsistent")
        }
        // The new PIN's generation: the old verifier goes, and one for the new PIN is made.
        try? offline.apply(result.offline, to: grant.entity, readAs: offline.record(grant.entity))
        offline.refresh(grant.entity, pin: pin)
        return count
    }

    /// Makes a new activation of the account; its data personalizes another machine (and is mailed, if asked).
    public func finishRequestNewActivationData(request: ApiAccessRequestNewActivationData) throws -> NewActivationData {
        let trigger = try request.message(
            sealedTo: try ManagerClient.pinSealingKey(request.grant.message.pinSealingKey),
            for: .grant(request.grant.message.grant))
        let result = try finish(
            request.grant,
            ApiAccessRequest(
                grant: request.grant.message.grant, nonce: try ManagerClient.nonce(), newActivation: trigger))
        guard let made = result.newActivation, let payload = try? PersonalizationPayload(parsing: made.activationData),
            payload.activationId == made.activationId,
            payload.managerKeyFingerprint == request.grant.managerKey.shortFingerprint,
            made.mailQueued == trigger.shouldSendEmail
        else {
            throw XignSdkError(.invalidManagerResponse, "the manager's new activation answer is inconsistent")
        }
        return NewActivationData(
            activationId: made.activationId, alias: made.alias, payload: payload, mailQueued: made.mailQueued)
    }

    /// Deletes the account at the manager, then forgets the enrolment here. Returns how many devices went with it.
    public func finishDeletion(request: ApiAccessDelete) throws -> Int {
        try store.checkWritable()
        let result = try finish(
            request.grant, ApiAccessRequest(grant: request.grant.message.grant, nonce: try ManagerClient.nonce()))
        guard let count = result.revokedDevices else {
            throw XignSdkError(.invalidManagerResponse, "the manager's deletion answer is inconsistent")
        }
        do { try store.forget(request.grant.entity, keys: keys) } catch {
            throw XignSdkError(
                .stateUnavailable,
                "the account was deleted at the manager, but this machine could not forget it (\(error)); "
                    + "run xign-setup remove --local-only \(request.idmIdentifier)")
        }
        return count
    }

    /// Records `factor` for this device at the manager; returns every factor the device can now sign with.
    /// Only after the factor was proven here (`finishAddBiometricFactor`).
    func finishAddFactor(
        request: ApiAccessAddFactor, factor: AuthenticatorType, biometricEnrolment: String?
    ) throws -> [AuthenticatorType] {
        let result = try finish(
            request.grant,
            ApiAccessRequest(
                grant: request.grant.message.grant, nonce: try ManagerClient.nonce(), factor: factor,
                biometricEnrolment: biometricEnrolment))
        guard let factors = result.factors, factors.contains(factor) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's add factor answer is inconsistent")
        }
        return factors
    }

    /// Removes the account's device `deviceId` at the manager; it stops working at once.
    public func finishRevokeDevice(request: ApiAccessRevokeDevice, deviceId: String) throws {
        let result = try finish(
            request.grant,
            ApiAccessRequest(
                grant: request.grant.message.grant, nonce: try ManagerClient.nonce(), revokedDeviceId: deviceId))
        guard result.revokedDevices == 1 else {
            throw XignSdkError(.invalidManagerResponse, "the manager's device removal answer is inconsistent")
        }
    }

    private func finish(_ grant: ApiAccessGrant, _ request: ApiAccessRequest) throws -> ApiAccessResultMessage {
        guard MonotonicClock.now() < grant.expiresAt else {
            throw XignSdkError(
                .sessionExpired, "the confirmation ran out before the process was finished; start it again")
        }
        let key = try keys.load(grant.entity.keyKind, grant.entity.keyReference, what: "device")
        let client = ManagerClient(url: grant.entity.managerURL, http: http)
        let compact = try client.postDeviceSigned(
            APIPath.apiAccess, body: try JSONEncoder.canonical.encode(request), challenge: grant.message.grant, key: key
        )
        let result = try ManagerClient.verify(
            compact, type: SignedAnswerType.apiAccess, key: grant.managerKey, as: ApiAccessResultMessage.self,
            nonce: request.nonce,
            nonceOf: \.nonce)
        guard result.process == grant.message.process, result.deviceId == grant.entity.idmIdentifier else {
            throw XignSdkError(.invalidManagerResponse, "the manager answered for another process or device")
        }
        return result
    }
}
