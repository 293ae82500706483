import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The api access processes: change PIN, request a new activation, delete the account, add a factor.
///
/// Each starts as an authentication at its built-in service, signed with device and PIN, so a wrong PIN
/// charges the lockout like any login. The finish answer carries a single-use grant instead of a login;
/// the device then signs the process's request over that grant at /v1/api-access.
extension IdentityManager {
    /// How long a grant lasts: long enough to type a new PIN twice.
    static let apiAccessGrantMilliseconds: Int64 = 300_000

    static let apiAccessServices: [String: ManagerConfiguration.Service] = Dictionary(
        uniqueKeysWithValues: ApiAccessProcess.allCases.map { process in
            let name: String
            switch process {
            case .changePin: name = "Change PIN"
            case .requestNewActivation: name = "New activation"
            case .delete: name = "Delete account"
            case .addFactor: name = "Add factor"
            }
            return (
                process.service,
                ManagerConfiguration.Service(
                    id: process.service, relyingPartyName: name,
                    roles: [RoleMessage(name: process.service, requestedAuthenticators: [[.device, .pin]])], attributes: [],
                    tokenLifetimeMilliseconds: apiAccessGrantMilliseconds)
            )
        })

    /// Answers an authentication at an api access service with its grant.
    func grantApiAccess(
        _ process: ApiAccessProcess, for authentication: ManagerStore.PendingAuthentication, authenticationId: String, role: String
    ) async throws -> ApiAccessGrantMessage {
        let now = Self.now()
        var grant = ApiAccessGrantMessage(
            process: process, grant: try SecureRandom.token(), issuedAt: now, expiresAt: now + Self.apiAccessGrantMilliseconds)
        if process == .changePin || process == .requestNewActivation { grant.pinSpec = configuration.pinPolicy }
        if process == .requestNewActivation {
            grant.aliasSpec = configuration.aliasPolicy
            grant.canSendEmail = true
        }
        let (code, expiresAt) = (grant.grant, grant.expiresAt)
        try await database.transaction { store in
            try await store.recordServiceLogin(authenticationId, role: role, code: code, codeExpiresAt: expiresAt, attributes: "{}")
            try await store.recordUse(ofDevice: authentication.deviceId, at: now)
        }
        return grant
    }

    /// Finishes a process with its grant. The device signs over the grant, so a grant that leaked is useless alone.
    public func finishApiAccess(body: Data, signature: String?) async throws -> String {
        let request = try Self.decode(ApiAccessRequest.self, from: body, "the api access request")
        guard (1...128).contains(request.grant.utf8.count), (1...128).contains(request.nonce.utf8.count),
            (request.newPin?.utf8.count ?? 0) <= 64, (request.newActivation?.pin.utf8.count ?? 0) <= 64,
            (request.newActivation?.alias?.utf8.count ?? 0) <= 256
        else {
            throw ManagerError.badRequest("a field of the api access request is empty or too long")
        }
        let rawSignature = try Self.signature(from: signature)
        let now = Self.now()
        let grant = try await database.transaction { store -> ManagerStore.CodeGrant in
            guard let grant = try await store.authorizationCode(request.grant, now: now), let process = ApiAccessProcess(service: grant.service)
            else {
                throw ManagerError(.conflict, .sessionInvalid, "the grant is unknown, expired or was used; start the process again")
            }
            let device = try await Self.enrolledDevice(grant.deviceId, in: store)
            let message = SignedRequest.canonicalMessage(method: "POST", path: APIPath.apiAccess, body: body, challenge: request.grant)
            guard device.publicKey.isValidSignature(rawSignature, for: message) else {
                throw ManagerError(.unauthorized, .signatureInvalid, "the device signature does not verify")
            }
            // Checked before the grant is spent, so a typo in the new PIN does not cost the user the whole process.
            try self.checkApiAccessFields(request, for: process)
            guard try await store.redeemAuthorizationCode(request.grant, now: now) != nil else {
                throw ManagerError(.conflict, .challengeInvalid, "the grant was already used")
            }
            return grant
        }
        let process = ApiAccessProcess(service: grant.service)!
        var result = ApiAccessResultMessage(nonce: request.nonce, process: process, deviceId: grant.deviceId)
        var mailId: String?
        switch process {
        case .changePin:
            result.activationsWithNewPin = try await changePIN(request.newPin!, grant: grant)
        case .requestNewActivation:
            (result.newActivation, mailId) = try await requestNewActivation(request.newActivation!, grant: grant)
        case .delete:
            result.revokedDevices = try await deleteAccount(grant: grant)
        case .addFactor:
            result.factors = try await addFactor(request.factor!, grant: grant)
        }
        if let mailId { await deliverMail(id: mailId) }
        logger.info("api access finished", metadata: ["device": "\(grant.deviceId)", "process": "\(process.rawValue)"])
        return try sign(result, type: SignedAnswerType.apiAccess)
    }

    private func checkApiAccessFields(_ request: ApiAccessRequest, for process: ApiAccessProcess) throws {
        guard (request.newPin != nil) == (process == .changePin), (request.newActivation != nil) == (process == .requestNewActivation),
            (request.factor != nil) == (process == .addFactor)
        else {
            throw ManagerError.badRequest("a \(process.rawValue) grant takes exactly the field of that process")
        }
        if let pin = request.newPin { try checkPINPolicy(pin, what: "the new PIN") }
        if let trigger = request.newActivation { try checkNewActivationTrigger(trigger) }
        if let factor = request.factor, factor != .biometric {
            throw ManagerError.badRequest("only the biometric factor can be added; device and PIN come with every enrolment")
        }
    }

    func checkPINPolicy(_ pin: String, what: String) throws {
        let verdict = configuration.pinPolicy.validate(pin)
        guard verdict == .valid else {
            throw ManagerError(
                .unprocessableContent, .pinPolicy, "\(what) does not meet the PIN policy (\(verdict.rawValue))", pinError: verdict.rawValue)
        }
    }

    /// The NewActivationTrigger's PIN and alias, shared with the rePersonalization that asks for a new activation.
    func checkNewActivationTrigger(_ trigger: NewActivationMessage) throws {
        try checkPINPolicy(trigger.pin, what: "the new activation PIN")
        if let alias = trigger.alias, configuration.aliasPolicy.validate(alias) != .valid {
            throw ManagerError(
                .unprocessableContent, .registrationRejected, "the alias does not meet the alias policy", attributes: ["alias": .invalid])
        }
    }

    private func accountOf(
        _ grant: ManagerStore.CodeGrant, in store: ManagerStore
    ) async throws -> (device: ManagerStore.DeviceRecord, activation: ManagerStore.ActivationRecord) {
        let device = try await Self.enrolledDevice(grant.deviceId, in: store)
        guard let activation = try await store.activation(id: device.activationId) else {
            throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
        }
        return (device, activation)
    }

    /// One new verifier for every activation of the account, in one transaction: all use the new PIN, or none.
    private func changePIN(_ pin: String, grant: ManagerStore.CodeGrant) async throws -> Int {
        let verifier = try makePINVerifier(pin: pin)
        return try await database.transaction { store in
            let (device, activation) = try await self.accountOf(grant, in: store)
            let count = try await store.setPIN(verifier, ofAccount: activation.accountId)
            try await store.recordAudit(
                AuditEvent(
                    .pinChanged, email: activation.email, activationId: activation.id, detail: "for \(count) activation(s) of the account",
                    actor: "device \(device.id)"))
            return count
        }
    }

    private func requestNewActivation(
        _ trigger: NewActivationMessage, grant: ManagerStore.CodeGrant
    ) async throws -> (NewActivationDataMessage, String?) {
        let fresh = try makeActivation(pin: trigger.pin)
        let payload = payload(for: fresh)
        return try await database.transaction { store in
            let (device, activation) = try await self.accountOf(grant, in: store)
            let count = try await store.activationCount(accountId: activation.accountId)
            let alias = trigger.alias ?? "Activation \(count + 1)"
            try await store.insertActivation(fresh.record(accountId: activation.accountId, alias: alias, deviceId: nil))
            try await store.recordAudit(
                AuditEvent(
                    .activationRequested, email: activation.email, activationId: fresh.id, detail: "alias \(alias)", actor: "device \(device.id)"))
            let mailId =
                trigger.shouldSendEmail
                ? try await self.queue(Outbox.activationMail(to: activation.email, alias: alias, payload: payload, backup: true), in: store) : nil
            let data = NewActivationDataMessage(
                activationId: fresh.id, alias: alias, activationData: payload.deepLink, mailQueued: mailId != nil)
            return (data, mailId)
        }
    }

    /// The account goes with all it holds; what stays is one audit entry that says it was deleted, and by which device.
    private func deleteAccount(grant: ManagerStore.CodeGrant) async throws -> Int {
        try await database.transaction { store in
            let (device, activation) = try await self.accountOf(grant, in: store)
            let devices = try await store.deleteAccount(activation.accountId)
            try await store.recordAudit(
                AuditEvent(
                    .accountDeleted, email: activation.email, detail: "with \(devices) device(s), at the request of its device \(device.id)",
                    actor: "device \(device.id)"))
            return devices
        }
    }

    private func addFactor(_ factor: AuthenticatorType, grant: ManagerStore.CodeGrant) async throws -> [AuthenticatorType] {
        try await database.transaction { store in
            let (device, activation) = try await self.accountOf(grant, in: store)
            let factors = device.factors.union([factor])
            try await store.setFactors(factors, ofDevice: device.id)
            try await store.recordAudit(
                AuditEvent(.factorAdded, email: activation.email, activationId: activation.id, detail: factor.rawValue, actor: "device \(device.id)"))
            return AuthenticatorType.allCases.filter(factors.contains)
        }
    }

    /// Device information: the devices of the caller's account, signed by the caller over a challenge.
    public func accountDevices(body: Data, signature: String?) async throws -> String {
        let request = try Self.decode(AccountDevicesRequest.self, from: body, "the device list request")
        guard request.deviceId.utf8.count <= 64, request.challenge.utf8.count <= 128, (1...128).contains(request.nonce.utf8.count) else {
            throw ManagerError.badRequest("a field of the device list request is empty or too long")
        }
        let devices = try await database.transaction { store in
            let activationId = try await self.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.accountDevices, body: body, signature: signature, in: store)
            guard let accountId = try await store.accountId(activationId: activationId) else {
                throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
            }
            return try await store.devices(ofAccount: accountId)
        }
        return try sign(AccountDevicesMessage(nonce: request.nonce, devices: devices), type: SignedAnswerType.accountDevices)
    }
}
