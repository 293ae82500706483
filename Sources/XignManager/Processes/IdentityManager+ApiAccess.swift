import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The api access processes: change PIN, request a new activation, delete the account, add a factor.
///
/// Each starts as an authentication for its purpose, signed with device and PIN, so a wrong PIN
/// charges the lockout like any login. The finish answer carries a single-use grant instead of a login;
/// the device then signs the process's request over that grant at /v1/api-access.
extension IdentityManager {
    /// How long a grant lasts: long enough to type a new PIN twice.

    /// Answers an authentication at an api access service with its grant.
    func grantApiAccess(
        _ process: ApiAccessProcess, for authentication: ManagerStore.PendingAuthentication, authenticationId: String,
        role: String
    ) async throws -> ApiAccessGrantMessage {
        let now = Self.now()
        var grant = ApiAccessGrantMessage(
            process: process, grant: try SecureRandom.token(), issuedAt: now,
            expiresAt: now + ServiceCatalog.apiAccessGrantMilliseconds)
        if process == .changePin || process == .requestNewActivation {
            grant.pinSpec = configuration.pinPolicy
            grant.pinSealingKey = pinSealingKey
        }
        if process == .requestNewActivation {
            grant.aliasSpec = configuration.aliasPolicy
            grant.canSendEmail = true
        }
        let (code, expiresAt) = (grant.grant, grant.expiresAt)
        try await database.transaction { store in
            try await store.recordServiceLogin(
                authenticationId, role: role, code: code, codeExpiresAt: expiresAt, attributes: "{}")
            try await store.recordUse(ofDevice: authentication.deviceId, at: now)
        }
        return grant
    }

    /// Finishes a process with its grant. The device signs over the grant, so a grant that leaked is useless alone.
    public func finishApiAccess(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(ApiAccessRequest.self, from: body, "the api access request")
        let proof = try RequestVerifier.DeviceProof(header: signature)
        // The grant and the device's proof over it (a passkey's counter moves here), and the process's field.
        let (grant, process) = try await database.transaction(durability: .unsynced) {
            store -> (ManagerStore.CodeGrant, ApiAccessProcess) in
            guard let grant = try await store.authorizationCode(request.grant, now: Self.now()),
                case .apiAccess(let process) = grant.purpose
            else {
                throw ManagerError(
                    .conflict, .sessionInvalid, "the grant is unknown, expired or was used; start the process again")
            }
            let device = try await DeviceEligibility.enrolledDevice(grant.deviceId, in: store)
            try await self.verifier.checkDeviceProof(
                proof, of: device, path: APIPath.apiAccess, body: body, challenge: request.grant, in: store)
            return (grant, process)
        }
        // Before the grant is spent, so a new PIN against the policy can be corrected and sent again.
        let newPIN = try checkApiAccessFields(request, for: process)
        // The slow PIN hash runs outside every transaction, and only for a signed, valid request.
        let verifier = try (process == .changePin ? newPIN : nil).map { try pinChecker.makeVerifier(pin: $0) }
        let fresh = try (process == .requestNewActivation ? newPIN : nil).map { try makeActivation(pin: $0) }
        // The grant is spent in the transaction that does the work: both happen, or neither.
        let (result, mailId) = try await database.transaction { store -> (ApiAccessResultMessage, String?) in
            guard try await store.redeemAuthorizationCode(request.grant, now: Self.now()) != nil else {
                throw ManagerError(.conflict, .challengeInvalid, "the grant was already used")
            }
            let (device, activation) = try await Self.account(of: grant, in: store)
            var result = ApiAccessResultMessage(nonce: request.nonce, process: process, deviceId: device.id)
            var mailId: String?
            switch process {
            case .changePin:
                result.activationsWithNewPin = try await self.changePIN(
                    verifier!, of: activation, by: device, in: store)
                // The new PIN's generation, so the device makes its offline verifier for it.
                result.offline = try await store.activation(id: activation.id).map {
                    self.offlinePolicy(for: device, of: $0)
                }
            case .requestNewActivation:
                (result.newActivation, mailId) = try await self.addActivation(
                    fresh!, request.newActivation!, to: activation, by: device, in: store)
            case .delete:
                result.revokedDevices = try await self.deleteAccount(of: activation, by: device, in: store)
            case .addFactor:
                result.factors = try await self.addFactor(
                    request.factor!, boundTo: request.biometricEnrolment, to: device, of: activation, in: store)
            case .revokeDevice:
                (result.revokedDevices, mailId) = try await self.revokeDevice(
                    request.revokedDeviceId!, of: activation, by: device, in: store)
            }
            return (result, mailId)
        }
        if let mailId { await mail.deliver(id: mailId) }
        logger.info("api access finished", metadata: ["device": "\(grant.deviceId)", "process": "\(process.rawValue)"])
        return try signer.sign(result, type: SignedAnswerType.apiAccess)
    }

    /// Checks that the request holds exactly its process's field; returns the new PIN of changePin or
    /// requestNewActivation, opened and checked against the policy.
    private func checkApiAccessFields(_ request: ApiAccessRequest, for process: ApiAccessProcess) throws -> String? {
        guard (request.sealedNewPin != nil) == (process == .changePin),
            (request.newActivation != nil) == (process == .requestNewActivation),
            (request.factor != nil) == (process == .addFactor),
            (request.revokedDeviceId != nil) == (process == .revokeDevice),
            request.biometricEnrolment == nil || request.factor == .biometric
        else {
            throw ManagerError.badRequest("a \(process.rawValue) grant takes exactly the field of that process")
        }
        if let factor = request.factor, factor != .biometric {
            throw ManagerError.badRequest(
                "only the biometric factor can be added; device and PIN come with every enrolment")
        }
        if let sealed = request.sealedNewPin {
            let pin = try pinChecker.open(sealed, for: .grant(request.grant))
            try checkPINPolicy(pin, what: "the new PIN")
            return pin
        }
        if let trigger = request.newActivation {
            let pin = try pinChecker.open(trigger.sealedPin, for: .grant(request.grant))
            try checkNewActivationTrigger(trigger, pin: pin)
            return pin
        }
        return nil
    }

    func checkPINPolicy(_ pin: String, what: String) throws {
        let verdict = configuration.pinPolicy.validate(pin)
        guard verdict == .valid else {
            throw ManagerError(
                .unprocessableContent, .pinPolicy, "\(what) does not meet the PIN policy (\(verdict.rawValue))",
                pinError: verdict.rawValue)
        }
    }

    /// The NewActivationTrigger's PIN and alias, shared with the rePersonalization that asks for a new activation.
    func checkNewActivationTrigger(_ trigger: NewActivationMessage, pin: String) throws {
        try checkPINPolicy(pin, what: "the new activation PIN")
        if let alias = trigger.alias, configuration.aliasPolicy.validate(alias) != .valid {
            throw ManagerError(
                .unprocessableContent, .registrationRejected, "the alias does not meet the alias policy",
                attributes: ["alias": .invalid])
        }
    }

    private static func account(
        of grant: ManagerStore.CodeGrant, in store: ManagerStore
    ) async throws -> (device: ManagerStore.DeviceRecord, activation: ManagerStore.ActivationRecord) {
        let device = try await DeviceEligibility.enrolledDevice(grant.deviceId, in: store)
        guard let activation = try await store.activation(id: device.activationId) else {
            throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
        }
        return (device, activation)
    }

    /// One new verifier for every activation of the account: all use the new PIN, or none.
    private func changePIN(
        _ verifier: PINVerifier, of activation: ManagerStore.ActivationRecord, by device: ManagerStore.DeviceRecord,
        in store: ManagerStore
    ) async throws -> Int {
        guard let count = try await store.setPIN(verifier, ofAccount: activation.accountId, now: Self.now()) else {
            // Rolled back with the grant unspent, so the same request can simply be sent again.
            throw ManagerError(
                .serviceUnavailable, .busy, "a PIN check of this account is running; send the change again in a moment")
        }
        try await store.recordAudit(
            AuditEvent(
                .pinChanged, email: activation.email, activationId: activation.id,
                detail: "for \(count) activation(s) of the account",
                actor: "device \(device.id)"))
        return count
    }

    /// An activation of the account that waits for its first personalization; its mail is queued when asked for.
    private func addActivation(
        _ fresh: ActivationSecrets, _ trigger: NewActivationMessage, to activation: ManagerStore.ActivationRecord,
        by device: ManagerStore.DeviceRecord, in store: ManagerStore
    ) async throws -> (NewActivationDataMessage, String?) {
        let payload = payload(for: fresh)
        let count = try await store.activationCount(accountId: activation.accountId)
        let alias = trigger.alias ?? "Activation \(count + 1)"
        try await store.insertActivation(
            fresh.record(
                accountId: activation.accountId, alias: alias, deviceId: nil,
                validFor: configuration.activationDataLifetimeMilliseconds))
        try await store.recordAudit(
            AuditEvent(
                .activationRequested, email: activation.email, activationId: fresh.id, detail: "alias \(alias)",
                actor: "device \(device.id)"))
        let mailId =
            trigger.shouldSendEmail
            ? try await self.mail.queue(
                Outbox.activationMail(to: activation.email, alias: alias, payload: payload, backup: true), in: store)
            : nil
        return (
            NewActivationDataMessage(
                activationId: fresh.id, alias: alias, activationData: payload.deepLink, mailQueued: mailId != nil),
            mailId
        )
    }

    /// The account goes with all it holds; what stays is its audit, under a pseudonym for its address, and one more entry
    /// that says it was deleted, and by which device.
    private func deleteAccount(
        of activation: ManagerStore.ActivationRecord, by device: ManagerStore.DeviceRecord, in store: ManagerStore
    ) async throws -> Int {
        let devices = try await store.deleteAccount(activation.accountId, pseudonym: secrets.pseudonym(ofEmail:))
        try await store.recordAudit(
            AuditEvent(
                .accountDeleted, email: secrets.pseudonym(ofEmail: activation.email),
                detail: "with \(devices) device(s), at the request of its device \(device.id)",
                actor: "device \(device.id)"))
        return devices
    }

    /// Another device of the same account goes, with its activation: a lost phone or a stolen laptop stops working at once.
    private func revokeDevice(
        _ id: String, of activation: ManagerStore.ActivationRecord, by device: ManagerStore.DeviceRecord,
        in store: ManagerStore
    ) async throws -> (Int, String?) {
        guard let lost = try await store.device(id), try await store.accountId(ofDevice: id) == activation.accountId,
            let held = try await store.activation(id: lost.activationId)
        else {
            throw ManagerError(
                .notFound, .deviceNotFound,
                "the account has no device \(id.prefix(64)); list them with xign-setup list --devices")
        }
        try await store.revokeDevice(lost.id)
        try await store.markRevoked(activationId: lost.activationId)
        let credential = lost.passkey.map { ", credential \($0.credentialId.prefix(64))" } ?? ""
        try await store.recordAudit(
            AuditEvent(
                .revocation, email: held.email, activationId: held.id,
                detail: "\(lost.keyKind.rawValue) device \(lost.id)\(credential) removed by another device",
                actor: "device \(device.id)"))
        let notice = try await self.mail.queue(
            Outbox.deviceNotice(
                to: held.email, alias: held.alias, device: "device \(lost.id) (\(lost.keyKind.rawValue))", added: false),
            in: store)
        return (1, notice)
    }

    /// Adding the biometric factor again binds it to the fingers enrolled now.
    private func addFactor(
        _ factor: AuthenticatorType, boundTo enrolment: String?, to device: ManagerStore.DeviceRecord,
        of activation: ManagerStore.ActivationRecord, in store: ManagerStore
    ) async throws -> [AuthenticatorType] {
        let factors = device.factors.union([factor])
        try await store.setFactors(factors, biometricEnrolment: enrolment, ofDevice: device.id)
        let bound = enrolment == nil ? "" : ", bound to the fingers enrolled now"
        try await store.recordAudit(
            AuditEvent(
                .factorAdded, email: activation.email, activationId: activation.id, detail: factor.rawValue + bound,
                actor: "device \(device.id)"))
        return ManagerStore.orderedFactors(factors)
    }

    /// Device information: the devices of the caller's account, signed by the caller over a challenge.
    public func accountDevices(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(AccountDevicesRequest.self, from: body, "the device list request")
        let devices = try await database.transaction { store in
            let device = try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.accountDevices, body: body,
                signature: signature, in: store)
            guard let accountId = try await store.accountId(activationId: device.activationId) else {
                throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
            }
            return try await store.devices(ofAccount: accountId)
        }
        return try signer.sign(
            AccountDevicesMessage(nonce: request.nonce, devices: devices), type: SignedAnswerType.accountDevices)
    }
}
