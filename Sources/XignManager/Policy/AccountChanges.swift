import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// What an api access grant lets a device change in its account: the PIN, a new activation, a factor, another device,
/// or the account itself. The grant comes from an authentication for its purpose (device and PIN, counted by the
/// lockout); each change is written in the transaction that spends the grant, with its audit.
struct AccountChanges: Sendable {
    let database: Database
    let configuration: ManagerConfiguration
    let secrets: ManagerSecrets
    let pinChecker: PINChecker
    let activations: Activations
    let mail: MailQueue

    /// Answers an authentication at an api access service with its grant.
    func grantApiAccess(
        _ process: ApiAccessProcess, for authentication: ManagerStore.PendingAuthentication, authenticationId: String,
        role: String
    ) async throws -> ApiAccessGrantMessage {
        let now = IdentityManager.now()
        var grant = ApiAccessGrantMessage(
            process: process, grant: try SecureRandom.token(), issuedAt: now,
            expiresAt: now + ServiceCatalog.apiAccessGrantMilliseconds)
        if process == .changePin || process == .requestNewActivation {
            grant.pinSpec = configuration.pinPolicy
            grant.pinSealingKey = secrets.publishedPINSealingKey
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

    /// Checks that the request holds exactly its process's field; returns the new PIN of changePin or
    /// requestNewActivation, opened and checked against the policy.
    func checkFields(_ request: ApiAccessRequest, for process: ApiAccessProcess) throws -> String? {
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

    static func account(
        of grant: ManagerStore.CodeGrant, in store: ManagerStore
    ) async throws -> (device: ManagerStore.DeviceRecord, activation: ManagerStore.ActivationRecord) {
        let device = try await DeviceEligibility.enrolledDevice(grant.deviceId, in: store)
        guard let activation = try await store.activation(id: device.activationId) else {
            throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
        }
        return (device, activation)
    }

    /// One new verifier for every activation of the account: all use the new PIN, or none.
    func changePIN(
        _ verifier: PINVerifier, of activation: ManagerStore.ActivationRecord, by device: ManagerStore.DeviceRecord,
        in store: ManagerStore
    ) async throws -> Int {
        guard let count = try await store.setPIN(verifier, ofAccount: activation.accountId, now: IdentityManager.now())
        else {
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
    func addActivation(
        _ fresh: IdentityManager.ActivationSecrets, _ trigger: NewActivationMessage,
        to activation: ManagerStore.ActivationRecord,
        by device: ManagerStore.DeviceRecord, in store: ManagerStore
    ) async throws -> (NewActivationDataMessage, String?) {
        let payload = activations.payload(for: fresh)
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
            ? try await mail.queue(
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
    func deleteAccount(
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
    func revokeDevice(
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
        let notice = try await mail.queue(
            Outbox.deviceNotice(
                to: held.email, alias: held.alias, device: "device \(lost.id) (\(lost.keyKind.rawValue))", added: false),
            in: store)
        return (1, notice)
    }

    /// Adding the biometric factor again binds it to the fingers enrolled now.
    func addFactor(
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
}
