import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// InApp authentication: start (device-signed over a challenge), finish (device-signed, PIN checked), token.
extension IdentityManager {
    public func startAuthentication(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(AuthenticationStartRequest.self, from: body, "the authentication start")
        // The confirmation a start approves, if any; only a confirmation carries a code (AuthenticationStartRequest.checkLimits).
        let confirmationId: String? = if case .confirmation(let id) = request.purpose { id } else { nil }
        let service = try services.service(for: request.purpose)
        // The device proves itself before anything is looked up, counted or written in its name, and its start is
        // counted in the same (unsynced) transaction, so a login pays no extra write for the limit. A plain login (no
        // offline report or code to count first) records its start in that transaction too; a refusal after the
        // proof still commits the spent challenge and the count, as a transaction of its own would.
        let plain = request.offlineReport == nil && confirmationId == nil
        let proof = {
            @Sendable (store: ManagerStore) async throws -> (ManagerStore.DeviceRecord, RateLimiter.RateLimitUse) in
            let device = try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.authentications, body: body,
                signature: signature, holdingItsActivation: plain, in: store)
            return (device, try await self.rateLimiter.countUse(.startsPerDevice, key: request.deviceId, in: store))
        }
        var confirmation: ManagerStore.ConfirmationRecord?
        if !plain {
            try rateLimiter.enforce(try await database.transaction(durability: .unsynced) { try await proof($0).1 })
            // Before the lock is judged below, so wrong offline PINs count toward it now.
            if let report = request.offlineReport {
                try await offline.recordOfflineReport(report, deviceId: request.deviceId, host: request.host)
            }
            // Number matching next: a wrong code counts against the confirmation, whatever else is wrong.
            confirmation = try await confirmationId.asyncMap {
                try await confirmations.checkCode(
                    request.confirmationCode, confirmationId: $0, deviceId: request.deviceId)
            }
        }
        let lifetime = configuration.sessionLifetimeMilliseconds
        let requirement = max(configuration.requireHardwareKey, service.requireHardwareKey)
        let relyingPartyName = confirmation?.hostName ?? service.relyingPartyName
        // Unsynced: a start lost in a power cut only makes the client start again.
        let start = try await ManagerMetrics.countingLockedLogins {
            try await database.transaction(durability: .unsynced) {
                store -> Result<AuthenticationStartMessage, ManagerError> in
                do {
                    let device: ManagerStore.DeviceRecord, activation: ManagerStore.ActivationRecord
                    if plain {
                        let (proven, use) = try await proof(store)
                        try self.rateLimiter.enforce(use)
                        (device, activation) = try await DeviceEligibility.authenticating(
                            proven, requirement: requirement, in: store)
                    } else {
                        (device, activation) = try await DeviceEligibility.authenticatingDevice(
                            request.deviceId, requirement: requirement, in: store)
                    }
                    if case .merge(let mergeSession) = request.purpose {
                        // Only the device the decrypt answer named may confirm the merge, while the session lasts.
                        guard try await store.isMergeSessionOpen(mergeSession, for: device.id, now: Self.now()) else {
                            throw ManagerError(
                                .conflict, .sessionInvalid,
                                "the merge session is unknown, expired or not for this device; scan the invite again")
                        }
                    }
                    let values = activation.accountAttributes
                    let message = AuthenticationStartMessage(
                        nonce: request.nonce, authenticationId: try SecureRandom.identifier(),
                        challenge: try SecureRandom.token(),
                        expiresAt: Self.now() + lifetime, purpose: request.purpose,
                        relyingPartyName: relyingPartyName,
                        roles: service.roles.map { role in
                            // Only the combinations this device can give; all of them when none fits, so the user learns what to enrol.
                            let possible = role.requestedAuthenticators.filter { Set($0).isSubset(of: device.factors) }
                            return RoleMessage(
                                name: role.name,
                                requestedAuthenticators: possible.isEmpty ? role.requestedAuthenticators : possible)
                        },
                        attributes: service.attributes.map { attribute in
                            let present = values[attribute.name] != nil
                            return AuthenticationAttributeMessage(
                                name: attribute.name, isRequired: attribute.isRequired, isDataMissing: !present,
                                aliases: present
                                    ? [
                                        PersonalInformationAliasMessage(
                                            alias: "registered \(attribute.name)", isPrimary: true)
                                    ] : []
                            )
                        },
                        offline: self.offline.policy(for: device, of: activation),
                        pinSealingKey: self.secrets.publishedPINSealingKey
                    )
                    try await store.insertAuthentication(
                        ManagerStore.NewAuthentication(
                            id: message.authenticationId, deviceId: device.id, activationId: activation.id,
                            purpose: request.purpose,
                            host: request.host, localUser: request.localUser, challenge: message.challenge,
                            expiresAt: message.expiresAt
                        ))
                    return .success(message)
                } catch let refusal as ManagerError where plain {
                    return .failure(refusal)
                }
            }.get()
        }
        return try signer.sign(start, type: SignedAnswerType.authenticationStart)
    }

    public func finishAuthentication(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(AuthenticationFinishRequest.self, from: body, "the authentication request")
        let proof = try RequestVerifier.DeviceProof(header: signature)
        // The challenge is consumed before anything else is judged, so a request can be answered once only.
        // The account's attributes are read here too, so the finish pays one transaction before the PIN check.
        // Every answer that grants something waits for a synced commit after this one (the PIN's verdict, the login's
        // record, the approval), which takes the spent challenge to the disk with it.
        let (authentication, device, known) = try await database.transaction(durability: .syncedLater) {
            store -> (ManagerStore.PendingAuthentication, ManagerStore.DeviceRecord, [String: String]) in
            guard let pending = try await store.pendingAuthentication(request.authenticationId, now: Self.now()) else {
                throw ManagerError(
                    .conflict, .sessionInvalid, "the authentication is unknown, expired or finished; start again")
            }
            let device = try await DeviceEligibility.enrolledDevice(pending.deviceId, in: store)
            try await self.verifier.checkDeviceProof(
                proof, of: device, path: APIPath.authenticationFinish, body: body, challenge: pending.challenge,
                in: store)
            guard try await store.consumeAuthenticationChallenge(request.authenticationId, challenge: pending.challenge)
            else {
                throw ManagerError(.conflict, .challengeInvalid, "the challenge was already used")
            }
            return (pending, device, pending.accountAttributes)
        }
        let service = try services.service(for: authentication.purpose)
        guard let role = service.roles.first(where: { $0.name == request.role }) else {
            throw ManagerError.badRequest("the service \(service.id) has no role '\(request.role.prefix(64))'")
        }
        let given = Set(request.factors)
        guard role.requestedAuthenticators.contains(where: { Set($0) == given }) else {
            throw ManagerError.badRequest(
                "the factors \(request.factors.map(\.rawValue)) match no combination role \(role.name) accepts")
        }
        guard given.isSubset(of: device.factors) else {
            throw ManagerError.badRequest(
                "this device has not enrolled \(given.subtracting(device.factors).map(\.rawValue).sorted().joined(separator: ", ")); add it first (the add factor process)"
            )
        }
        // Before the PIN is checked: a finger that no longer counts costs no PIN attempt.
        if given.contains(.biometric) {
            try await checkFingerEnrolment(
                request.biometricEnrolment, of: device, for: authentication, service: service.id)
        }
        let missing = try checkAttributes(request, service: service, known: known)
        // A login's record commits with the PIN's verdict; other purposes decide things a PIN check must not wait on.
        let login: ServiceLoginRecord?
        if case .login = authentication.purpose {
            login = try ServiceLoginRecord(
                request, of: authentication, at: service, role: role.name, attributes: missing)
        } else {
            login = nil
        }

        let outcome: AuthenticationOutcome
        if given.contains(.pin),
            let lock = try await checkPIN(
                of: request, for: authentication, at: service, role: role.name, whenRight: login?.write)
        {
            outcome = .lockout(lock.0, nextChallenge: lock.nextChallenge)
        } else {
            outcome = try await grant(
                authentication, login: login, request: request, service: service, role: role.name, known: known,
                missing: missing)
        }
        return try signer.sign(
            AuthenticationResultMessage(nonce: request.nonce, outcome: outcome),
            type: SignedAnswerType.authenticationResult)
    }

    /// What the finish of an authentication whose factors hold grants, by its purpose.
    private func grant(
        _ authentication: ManagerStore.PendingAuthentication, login: ServiceLoginRecord?,
        request: AuthenticationFinishRequest,
        service: ManagerConfiguration.Service, role: String, known: [String: String], missing: [String: String]
    ) async throws -> AuthenticationOutcome {
        let given = Set(request.factors)
        switch authentication.purpose {
        case .login:
            guard let login else { throw ManagerError.internalFailure("a login without its record") }
            if !given.contains(.pin) { try await database.transaction { store in try await login.write(in: store) } }
            ManagerMetrics.login(.success)
            logger.info(
                "authenticated",
                metadata: ["device": "\(authentication.deviceId)", "service": "\(service.id)", "role": "\(role)"])
            // The token the code would buy, without the round trip for it: this answer is signed for the same device.
            let token = try request.tokenNonce.map { tokenNonce in
                try signer.sign(
                    LoginTokens.token(
                        nonce: tokenNonce, deviceId: authentication.deviceId, activationId: authentication.activationId,
                        service: service,
                        role: role, host: authentication.host, localUser: authentication.localUser, known: known,
                        given: missing,
                        now: login.issuedAt),
                    type: SignedAnswerType.loginToken)
            }
            return .serviceLogin(login.message, loginToken: token)
        case .confirmation(let id):
            let approval = try await confirmations.approve(
                id, by: authentication.deviceId, of: authentication.activationId, email: authentication.email,
                at: service, role: role)
            ManagerMetrics.login(.success)
            return .userLogin(approval)
        case .merge(let sessionId):
            return .mergeComplete(mergedEmail: try await merge(session: sessionId, into: authentication.activationId))
        case .apiAccess(let process):
            return .apiAccess(
                try await accountChanges.grantApiAccess(
                    process, for: authentication, authenticationId: request.authenticationId, role: role))
        }
    }

    /// The finish's PIN, charged to the lockout like every check. A wrong one gives the lock, and for a lock that
    /// runs out the challenge the next attempt signs (the previous signatures are spent).
    private func checkPIN(
        of request: AuthenticationFinishRequest, for authentication: ManagerStore.PendingAuthentication,
        at service: ManagerConfiguration.Service,
        role: String, whenRight: PINChecker.WhenRight?
    ) async throws -> (LockoutMessage, nextChallenge: String?)? {
        guard let sealed = request.sealedPin else { throw ManagerError.badRequest("role \(role) needs the PIN factor") }
        let pin = try pinChecker.open(
            sealed, for: .authentication(id: request.authenticationId, challenge: authentication.challenge))
        let purpose = PINChecker.Purpose(
            service: service.id, host: authentication.host, actor: "device \(authentication.deviceId)")
        let verdict = try await ManagerMetrics.countingLockedLogins {
            try await pinChecker.check(
                pin, ofDevice: authentication.deviceId, activationId: authentication.activationId, for: purpose,
                whenRight: whenRight)
        }
        guard let lock = verdict.lockout else { return nil }
        ManagerMetrics.login(.wrongPIN)
        guard !lock.isPermanent else { return (lock, nil) }
        let next = try SecureRandom.token()
        let expiresAt = max(lock.lockedUntil, Self.now()) + configuration.sessionLifetimeMilliseconds
        // Unsynced, as every new challenge: losing it only makes the user start again.
        try await database.transaction(durability: .unsynced) { store in
            try await store.renewAuthenticationChallenge(
                request.authenticationId, challenge: next, expiresAt: expiresAt)
        }
        return (lock, next)
    }

    /// A login's writes once its factors hold: the single-use authorization code (batched into the finish answer
    /// to save a round trip), the device's last use and the audit.
    private struct ServiceLoginRecord: Sendable {
        let authenticationId: String
        let authentication: ManagerStore.PendingAuthentication
        let service: ManagerConfiguration.Service
        let role: String
        let code: String?
        let issuedAt: Int64
        let attributes: String

        init(
            _ request: AuthenticationFinishRequest, of authentication: ManagerStore.PendingAuthentication,
            at service: ManagerConfiguration.Service,
            role: String, attributes missing: [String: String]
        ) throws {
            (authenticationId, self.authentication, self.service, self.role) = (
                request.authenticationId, authentication, service, role
            )
            // A login whose token comes with the answer gets no code: nothing is left to redeem.
            code = request.tokenNonce == nil ? try SecureRandom.token() : nil
            issuedAt = IdentityManager.now()
            attributes = String(decoding: try JSONEncoder.canonical.encode(missing), as: UTF8.self)
        }

        var expiresAt: Int64 { issuedAt + 60_000 }

        var message: ServiceLoginMessage {
            ServiceLoginMessage(
                authorizationCode: code, issuedAt: issuedAt, expiresAt: expiresAt, service: service.id,
                relyingPartyName: service.relyingPartyName, role: role)
        }

        @Sendable func write(in store: ManagerStore) async throws {
            try await store.recordServiceLogin(
                authenticationId, role: role, code: code, codeExpiresAt: expiresAt, attributes: attributes)
            try await store.recordUse(ofDevice: authentication.deviceId, at: issuedAt)
            try await store.recordAudit(
                AuditEvent(
                    at: issuedAt, event: .login, email: authentication.email, activationId: authentication.activationId,
                    host: authentication.host, service: service.id,
                    detail: "role \(role) as \(authentication.localUser)", actor: "device \(authentication.deviceId)"
                ))
        }
    }

    /// The invite's address joins the confirming device's account; the temporary account and its activation go.
    private func merge(session: String, into activationId: String) async throws -> String {
        try await database.transaction { store in
            guard let invite = try await store.invitedAccount(personalizationSession: session),
                let target = try await store.accountId(activationId: activationId)
            else {
                throw ManagerError(.conflict, .sessionInvalid, "the invite was merged or activated meanwhile")
            }
            try await store.mergeAccount(invite, into: target)
            self.logger.info("organization invite merged", metadata: ["email": "\(invite.email)"])
            return invite.email
        }
    }

    /// Checks the attribute part of a finish request; returns the values given for missing data.
    private func checkAttributes(
        _ request: AuthenticationFinishRequest, service: ManagerConfiguration.Service, known: [String: String]
    ) throws -> [String: String] {
        var errors: [String: AuthenticationAttributeErrorCode] = [:]
        for attribute in service.attributes {
            if let value = request.attributeValues[attribute.name] {
                let verdict = AttributeValidator.validate(name: attribute.name, value: value)
                if verdict != .valid { errors[attribute.name] = .invalid }
            } else if known[attribute.name] == nil && attribute.isRequired {
                errors[attribute.name] = .dataMissing
            }
        }
        for name in request.attributeValues.keys where !service.attributes.contains(where: { $0.name == name }) {
            errors[name] = .notAvailable
        }
        guard errors.isEmpty else {
            throw ManagerError(
                .unprocessableContent, .attributesRejected,
                "attributes are missing or invalid; correct those in authenticationAttributes and start again",
                authenticationAttributes: errors)
        }
        return request.attributeValues
    }

    /// Exchanges a single-use authorization code for the login token.
    public func token(_ request: TokenRequest) async throws -> String { try await loginTokens.redeem(request) }
}
