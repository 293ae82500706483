import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// The activation data from a QR code, deep link or activation mail.
public struct PersonalizationInitializationData: Sendable, Equatable {
    public let payload: PersonalizationPayload

    public init(payload: PersonalizationPayload) { self.payload = payload }

    /// A deep link (xign://personalize?…) or an App-Link (https://…/link/personalize#…).
    public init(parsing text: String) throws {
        do { payload = try PersonalizationPayload(parsing: text) } catch {
            throw XignSdkError(.activationDataInvalid, "\(error)")
        }
    }

    /// The activation mail as a file's contents.
    public init(parsingMail text: String) throws {
        do { payload = try PersonalizationPayload(parsingMail: text) } catch {
            throw XignSdkError(.activationDataInvalid, "\(error)")
        }
    }
}

/// What a successful PIN check allows next; pass it to `personalizeIdentityManagerSynchronous`.
public final class PersonalizationParameters {
    public let outcome: PersonalizationOutcome
    public let accountEmail: String
    public let activationAlias: String
    /// The device that holds the activation now, for rePersonalization and alreadyPersonalized.
    public let personalizedDeviceId: String?
    let managerURL: ManagerURL
    let managerKey: P256PublicKey
    /// What the new activation's PIN is sealed to, signed by `managerKey`.
    let pinSealingKey: P256PublicKey
    let activationId: String
    let session: SessionMessage
    /// A local enrolment this personalization replaces (merge continued as a new account).
    let replacesIdmIdentifier: String?
    /// The activation PIN the manager just accepted; the offline verifier is made with it.
    let pin: String

    init(
        result: DecryptResult, managerURL: ManagerURL, keys: (signing: P256PublicKey, sealing: P256PublicKey),
        session: SessionMessage,
        replaces: String?, pin: String
    ) {
        outcome = result.outcome
        accountEmail = result.accountEmail ?? ""
        activationAlias = result.activationAlias ?? ""
        personalizedDeviceId = result.personalizedDeviceId
        self.managerURL = managerURL
        self.managerKey = keys.signing
        pinSealingKey = keys.sealing
        activationId = result.activationId
        self.session = session
        replacesIdmIdentifier = replaces
        self.pin = pin
    }

    var mode: PersonalizationMode {
        switch outcome {
        case .rePersonalization, .alreadyPersonalized: return .override
        case .newPersonalization, .mergePersonalization, .lockout: return .new
        }
    }
}

/// What a new activation is made with: its PIN, an optional alias, and whether to mail its data.
/// Both ways to a new activation fill it in: rePersonalization's trigger and the api access request.
public class NewActivationChoices {
    public let pinSpec: PinSpecification
    public let validatorAlias: AliasValidator
    /// Whether this manager can mail the new activation data.
    public let canSendEmail: Bool
    public var shouldSendEmail = false
    public private(set) var alias: String?

    init(pinSpec: PinPolicyMessage, aliasSpec: AliasPolicyMessage, canSendEmail: Bool) {
        self.pinSpec = PinSpecification(pinSpec)
        validatorAlias = AliasValidator(policy: aliasSpec)
        self.canSendEmail = canSendEmail
    }

    @discardableResult
    public func setAlias(_ alias: String) -> AliasValidator.ResultCode {
        let result = validatorAlias.validate(alias)
        self.alias = result == .valid ? alias : nil
        return result
    }

    /// The choices as the manager takes them, the PIN sealed to `managerKey`; a valid PIN must be set first.
    func message(sealedTo sealingKey: P256PublicKey, for binding: PINBinding) throws -> NewActivationMessage {
        guard let pin = pinSpec.pin else {
            throw XignSdkError(.parametersIncomplete, "set a valid activation PIN on pinSpec first")
        }
        return NewActivationMessage(
            sealedPin: try ManagerClient.seal(pin, to: sealingKey, for: binding), alias: alias,
            shouldSendEmail: shouldSendEmail && canSendEmail)
    }
}

/// rePersonalization's other way on: a second activation for this device, leaving the original one intact.
public final class NewActivationTrigger: NewActivationChoices {
    let parameters: PersonalizationParameters

    init(
        pinSpec: PinPolicyMessage, aliasSpec: AliasPolicyMessage, canSendEmail: Bool,
        parameters: PersonalizationParameters
    ) {
        self.parameters = parameters
        super.init(pinSpec: pinSpec, aliasSpec: aliasSpec, canSendEmail: canSendEmail)
    }
}

/// The data to merge an organization invite into the account this machine already holds.
/// Confirming the merge is an authentication with the existing device (see the authentication process).
public struct AuthenticationInitializationDataWithSession: Sendable, Equatable {
    public let existingIdmIdentifier: String
    public let existingAccountEmail: String
    public let invitedEmail: String
    public let organization: String
    /// The invite's personalization session, which the merge authentication refers to.
    let sessionId: String
}

/// The SDKs' five answers to decrypting activation data; each says what the next step may be.
public enum PersonalizationResponse {
    case newPersonalization(PersonalizationParameters)
    case rePersonalization(PersonalizationParameters, NewActivationTrigger)
    case alreadyPersonalized(PersonalizationParameters)
    case mergePersonalization(PersonalizationParameters, AuthenticationInitializationDataWithSession)
    case lockout(
        lockoutInformation: LockoutAttemptInformation,
        personalizationInitializationData: PersonalizationInitializationData)
}

/// What a finished personalization leaves on the machine: the enrolment the logins use.
public struct PersonalizationResult: Sendable, Equatable {
    public let idmIdentifier: String
    public let entity: IdentityManagerEntity
    /// For a TPM key, what the manager found it to be ("attested by …" or "not attested: …"), safe to print.
    public var keyAttestation: String? = nil
}

/// Personalization (activation) of this machine for one local user (the SDKs' Personalizer).
public struct Personalizer {
    let http: HTTPClient
    let store: IdentityManagerStore
    let keys: DeviceKeys
    let localUser: String
    let device: DeviceInformationMessage
    /// Nevis's rule: a given URL replaces scheme, host and port of the one in the activation data.
    let managerURLOverride: ManagerURL?
    let fingerprints: FingerprintReader
    let offline: OfflineLogins

    func managerURL(for data: PersonalizationInitializationData) -> ManagerURL {
        managerURLOverride.map { data.payload.managerURL.overriding(with: $0) } ?? data.payload.managerURL
    }

    /// Asks the manager to check `pin` against the activation. Every call counts toward the lockout.
    public func decryptPersonalizationInitializationDataSynchronous(
        data: PersonalizationInitializationData, pin: String
    ) throws -> PersonalizationResponse {
        let payload = data.payload
        let url = managerURL(for: data)
        // Before anything that changes state anywhere: the state directory must be writable here.
        try store.checkWritable()
        // A remembered lock is not checked here: the manager, which may have lifted it, answers 423 while it holds.
        let mine = try store.list().filter { $0.managerURL == url }
        if let other = mine.first(where: {
            $0.activationId == payload.activationId && !UserName.same($0.localUser, localUser)
        }) {
            throw XignSdkError(
                .invalidInput,
                "this activation is bound to the local user \(other.localUser) on this machine; remove it there first with `xign-setup remove \(other.idmIdentifier)`"
            )
        }
        guard !pin.isEmpty, pin.utf8.count <= WireLimit.pin else {
            throw XignSdkError(.invalidInput, "the PIN must have 1 to \(WireLimit.pin) characters")
        }
        let nonce = try ManagerClient.nonce()
        let client = ManagerClient(url: url, http: http)
        let keys = try client.managerKeys(pinnedTo: payload.managerKeyFingerprint)
        let managerKey = keys.signing
        let request = DecryptRequest(
            activationId: payload.activationId, activationSecret: payload.activationSecret,
            sealedPin: try ManagerClient.seal(
                pin, to: keys.sealing, for: .decrypt(activationId: payload.activationId, nonce: nonce)), nonce: nonce,
            knownDeviceIds: mine.filter { UserName.same($0.localUser, localUser) }.map(\.idmIdentifier)
        )
        let compact = try client.postSigned(
            APIPath.personalizationDecrypt, body: try JSONEncoder.canonical.encode(request))
        let result = try ManagerClient.verify(
            compact, type: SignedAnswerType.decrypt, key: managerKey, as: DecryptResult.self, nonce: nonce,
            nonceOf: \.nonce)
        guard result.activationId == payload.activationId else {
            throw XignSdkError(.invalidManagerResponse, "the manager answered for another activation")
        }
        if result.outcome == .lockout {
            guard let lock = result.lockout else {
                throw XignSdkError(.invalidManagerResponse, "the manager reported a lockout without its time")
            }
            let information = LockoutAttemptInformation(lock)
            try store.recordLockout(activationId: payload.activationId, information)
            return .lockout(lockoutInformation: information, personalizationInitializationData: data)
        }
        try store.recordLockout(activationId: payload.activationId, nil)
        guard let session = result.session else {
            throw XignSdkError(.invalidManagerResponse, "the manager's answer has no usable personalization session")
        }
        let replaces = result.merge.flatMap { merge in
            mine.first { $0.idmIdentifier == merge.existingDeviceId }?.idmIdentifier
        }
        let parameters = PersonalizationParameters(
            result: result, managerURL: url, keys: keys, session: session, replaces: replaces, pin: pin)
        switch result.outcome {
        case .newPersonalization:
            return .newPersonalization(parameters)
        case .alreadyPersonalized:
            return .alreadyPersonalized(parameters)
        case .rePersonalization:
            guard let pinSpec = result.pinSpec, let aliasSpec = result.aliasSpec,
                pinSpec.minLength <= pinSpec.maxLength, pinSpec.maxLength <= 64
            else {
                throw XignSdkError(
                    .invalidManagerResponse, "the manager's rePersonalization answer lacks a usable PIN specification")
            }
            let trigger = NewActivationTrigger(
                pinSpec: pinSpec, aliasSpec: aliasSpec, canSendEmail: result.canSendEmail ?? false,
                parameters: parameters)
            return .rePersonalization(parameters, trigger)
        case .mergePersonalization:
            guard let merge = result.merge else {
                throw XignSdkError(.invalidManagerResponse, "the manager's merge answer lacks the merge data")
            }
            return .mergePersonalization(
                parameters,
                AuthenticationInitializationDataWithSession(
                    existingIdmIdentifier: merge.existingDeviceId, existingAccountEmail: merge.existingAccountEmail,
                    invitedEmail: merge.invitedEmail, organization: merge.organization, sessionId: session.id
                ))
        case .lockout:
            throw XignSdkError(.invalidManagerResponse, "the manager's lockout answer is inconsistent")
        }
    }

    /// Creates the device key, registers it and stores the enrolment.
    public func personalizeIdentityManagerSynchronous(
        parameters: PersonalizationParameters
    ) throws -> PersonalizationResult {
        try personalize(parameters, mode: parameters.mode, newActivation: nil)
    }

    /// Finishes a rePersonalization with a new activation; the trigger needs a valid PIN set first.
    public func personalizeIdentityManagerSynchronous(trigger: NewActivationTrigger) throws -> PersonalizationResult {
        let parameters = trigger.parameters
        let newActivation = try trigger.message(
            sealedTo: parameters.pinSealingKey, for: .personalization(sessionId: parameters.session.id))
        return try personalize(parameters, mode: .newActivation, newActivation: newActivation)
    }

    private func personalize(
        _ parameters: PersonalizationParameters, mode: PersonalizationMode, newActivation: NewActivationMessage?
    ) throws -> PersonalizationResult {
        try store.checkWritable()
        var offlinePolicy: OfflinePolicyMessage?
        var keyAttestation: String?
        var replacedVerifiers: [String] = []
        let entity = try keys.register(
            "device", retry: "personalize again",
            { key, publicKey, kind, reference in
                let nonce = try ManagerClient.nonce()
                let client = ManagerClient(url: parameters.managerURL, http: http)
                let attestation = try KeyAttestor(tpm: keys.tpm, client: client).evidence(
                    for: key, purpose: .personalization(sessionId: parameters.session.id))
                let request = PersonalizeRequest(
                    sessionId: parameters.session.id, mode: mode, deviceKey: publicKey,
                    keyKind: kind, device: device, nonce: nonce, newActivation: newActivation, attestation: attestation
                )
                let compact = try client.postDeviceSigned(
                    APIPath.personalizations, body: try JSONEncoder.canonical.encode(request),
                    challenge: parameters.session.challenge, key: key
                )
                let result = try ManagerClient.verify(
                    compact, type: SignedAnswerType.personalization, key: parameters.managerKey,
                    as: PersonalizationResultMessage.self, nonce: nonce,
                    nonceOf: \.nonce
                )
                guard result.deviceKey == publicKey,
                    mode == .newActivation || result.activationId == parameters.activationId
                else {
                    throw XignSdkError(
                        .invalidManagerResponse, "the manager's personalization answer does not match this request")
                }
                offlinePolicy = result.offline
                keyAttestation = KeyAttestor.summary(
                    attestedBy: result.attestedBy, notAttestedBecause: result.notAttestedBecause)
                return IdentityManagerEntity(
                    idmIdentifier: result.deviceId, managerURL: parameters.managerURL,
                    managerKey: Base64URL.encode(parameters.managerKey.derRepresentation),
                    activationId: result.activationId, accountEmail: result.accountEmail, alias: result.activationAlias,
                    localUser: localUser,
                    keyKind: kind, keyReference: reference, personalizedAt: Date().millisecondsSince1970
                )
            },
            save: { entity in
                try store.update { contents in
                    let gone = contents.entries.filter {
                        $0.managerURL == entity.managerURL
                            && ($0.activationId == entity.activationId
                                || $0.idmIdentifier == parameters.replacesIdmIdentifier)
                    }
                    contents.entries.removeAll { old in gone.contains(old) }
                    contents.entries.append(entity)
                    replacedVerifiers = gone.compactMap { contents.dropOfflineRecord(of: $0.idmIdentifier) }
                    return gone.map { (kind: $0.keyKind, reference: $0.keyReference) }
                }
            })
        for reference in replacedVerifiers { try? keys.pinVerifiers.delete(reference) }
        // With a new activation the PIN typed at the start is not the one it logs in with (the manager sends no policy).
        if let offlinePolicy {
            try? offline.apply(offlinePolicy, to: entity, readAs: offline.record(entity))
            offline.refresh(entity, pin: parameters.pin)
        }
        return PersonalizationResult(
            idmIdentifier: entity.idmIdentifier, entity: entity, keyAttestation: keyAttestation)
    }
}
