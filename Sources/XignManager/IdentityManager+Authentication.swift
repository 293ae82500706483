import Foundation
import SQLKit
import XignCrypto
import XignProtocol

/// InApp authentication in three round trips: start, finish (device-signed, PIN checked), token.
extension IdentityManager {
    /// What every device enrolled here can give. Biometrics need their own enrolment, which Linux devices do not have yet.
    static let enrolledFactors: Set<AuthenticatorType> = [.device, .pin]

    struct DeviceRow: Sendable {
        var id: String
        var activationId: String
        var publicKey: P256PublicKey
        var keyKind: KeyKind
    }

    func enrolledDevice(_ id: String, on sql: any SQLDatabase) async throws -> DeviceRow {
        guard let row = try await sql.raw("""
            SELECT d.id, d.activation_id, d.public_key, d.key_kind FROM devices d JOIN activations a ON a.id = d.activation_id
            WHERE d.id = \(bind: id) AND d.revoked = 0 AND a.state = 'personalized' AND a.device_id = d.id
            """).first() else {
            throw ManagerError(.notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager; personalize it again with xign-setup")
        }
        guard let keyBytes = Base64URL.decode(try row.decode(column: "public_key", as: String.self)),
              let key = try? P256PublicKey(derRepresentation: keyBytes) else {
            throw ManagerError.internalFailure("stored key of device \(id) is corrupt")
        }
        return DeviceRow(
            id: id, activationId: try row.decode(column: "activation_id", as: String.self), publicKey: key,
            keyKind: KeyKind(rawValue: try row.decode(column: "key_kind", as: String.self)) ?? .software
        )
    }

    /// The merge process, built in: the existing device confirms with device and PIN.
    static let mergeService = ManagerConfiguration.Service(
        id: APIPath.mergeService, relyingPartyName: "Account merge",
        roles: [RoleMessage(name: "merge", requestedAuthenticators: [[.device, .pin]])], attributes: [], tokenLifetimeMilliseconds: 60_000
    )

    func service(_ id: String) throws -> ManagerConfiguration.Service {
        if id == APIPath.mergeService { return Self.mergeService }
        guard let service = configuration.services.first(where: { $0.id == id }) else {
            throw ManagerError(.notFound, .notFound, "the manager has no service '\(id.prefix(64))'; check service= in the PAM configuration")
        }
        return service
    }

    /// The account's attribute values, email included.
    func accountAttributes(activationId: String, on sql: any SQLDatabase) async throws -> [String: String] {
        guard let row = try await sql.raw("""
            SELECT c.email, c.attributes FROM activations a JOIN accounts c ON c.id = a.account_id WHERE a.id = \(bind: activationId)
            """).first() else { return [:] }
        var values = (try? JSONDecoder().decode([String: String].self, from: Data(try row.decode(column: "attributes", as: String.self).utf8))) ?? [:]
        values["email"] = try row.decode(column: "email", as: String.self)
        return values
    }

    public func startAuthentication(_ request: AuthenticationStartRequest) async throws -> String {
        guard request.deviceId.utf8.count <= 64, (1...253).contains(request.host.utf8.count), (1...64).contains(request.localUser.utf8.count),
              (1...128).contains(request.nonce.utf8.count), request.service.utf8.count <= 64 else {
            throw ManagerError.badRequest("a field of the authentication request is empty or too long")
        }
        guard (request.service == APIPath.mergeService) == (request.mergeSessionId != nil), (request.mergeSessionId?.utf8.count ?? 0) <= 64 else {
            throw ManagerError.badRequest("the merge process needs service \(APIPath.mergeService) together with mergeSessionId")
        }
        let service = try service(request.service)
        let lifetime = configuration.sessionLifetimeMilliseconds
        let requireHardware = configuration.requireHardwareKey
        let start = try await database.transaction { sql -> AuthenticationStartMessage in
            let device = try await self.enrolledDevice(request.deviceId, on: sql)
            if requireHardware && device.keyKind == .software {
                throw ManagerError(.forbidden, .securityInsufficient, "this manager accepts only hardware-bound (TPM) device keys; personalize again with device_key = tpm")
            }
            guard let activation = try await self.activation(id: device.activationId, on: sql) else {
                throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
            }
            if let lock = activation.pendingLock { throw ManagerError.lockedOut(lock) }
            if let mergeSession = request.mergeSessionId {
                // Only the device the decrypt answer named may confirm the merge, while the session lasts.
                guard try await sql.raw("""
                    SELECT id FROM personalization_sessions WHERE id = \(bind: mergeSession) AND outcome = 'mergePersonalization'
                    AND merge_device_id = \(bind: device.id) AND expires_at > \(bind: Self.now())
                    """).first() != nil else {
                    throw ManagerError(.conflict, .sessionInvalid, "the merge session is unknown, expired or not for this device; scan the invite again")
                }
            }
            let values = try await self.accountAttributes(activationId: activation.id, on: sql)
            let message = AuthenticationStartMessage(
                nonce: request.nonce, authenticationId: try SecureRandom.identifier(), challenge: try SecureRandom.token(),
                expiresAt: Self.now() + lifetime, service: service.id, relyingPartyName: service.relyingPartyName,
                roles: service.roles.map { role in
                    // Only the combinations this device can give; all of them when none fits, so the user learns what to enrol.
                    let possible = role.requestedAuthenticators.filter { Set($0).isSubset(of: Self.enrolledFactors) }
                    return RoleMessage(name: role.name, requestedAuthenticators: possible.isEmpty ? role.requestedAuthenticators : possible)
                },
                attributes: service.attributes.map { attribute in
                    let present = values[attribute.name] != nil
                    return AuthenticationAttributeMessage(
                        name: attribute.name, isRequired: attribute.isRequired, isDataMissing: !present,
                        aliases: present ? [PersonalInformationAliasMessage(alias: "registered \(attribute.name)", isPrimary: true)] : []
                    )
                }
            )
            try await sql.raw("""
                INSERT INTO authentications (id, device_id, activation_id, service, host, local_user, challenge, expires_at, merge_session_id)
                VALUES (\(bind: message.authenticationId), \(bind: device.id), \(bind: activation.id), \(bind: service.id), \(bind: request.host),
                        \(bind: request.localUser), \(bind: message.challenge), \(bind: message.expiresAt), \(bind: request.mergeSessionId))
                """).run()
            return message
        }
        return try sign(start, type: SignedAnswerType.authenticationStart)
    }

    public func finishAuthentication(body: Data, signature: String?) async throws -> String {
        let request: AuthenticationFinishRequest
        do { request = try JSONDecoder().decode(AuthenticationFinishRequest.self, from: body) } catch {
            throw ManagerError.badRequest("the authentication request is not valid JSON of the expected shape")
        }
        guard request.authenticationId.utf8.count <= 64, (1...128).contains(request.nonce.utf8.count), (request.pin?.utf8.count ?? 0) <= 64,
              request.role.utf8.count <= 64, request.factors.count <= 8,
              request.attributeValues.count <= 16, request.attributeSelections.count <= 16,
              request.attributeValues.allSatisfy({ $0.key.utf8.count <= 64 && $0.value.utf8.count <= 256 }) else {
            throw ManagerError.badRequest("a field of the authentication request is empty or too long")
        }
        let rawSignature = try Self.signature(from: signature)
        // The challenge is consumed before anything else is judged, so a request can be answered once only.
        let authentication = try await database.transaction { sql -> (device: String, activation: String, service: String, mergeSession: String?) in
            guard let row = try await sql.raw("""
                SELECT device_id, activation_id, service, challenge, merge_session_id FROM authentications
                WHERE id = \(bind: request.authenticationId) AND challenge IS NOT NULL AND expires_at > \(bind: Self.now())
                """).first() else {
                throw ManagerError(.conflict, .sessionInvalid, "the authentication is unknown, expired or finished; start again")
            }
            let challenge = try row.decode(column: "challenge", as: String.self)
            let device = try await self.enrolledDevice(try row.decode(column: "device_id", as: String.self), on: sql)
            let message = SignedRequest.canonicalMessage(method: "POST", path: APIPath.authenticationFinish, body: body, challenge: challenge)
            guard device.publicKey.isValidSignature(rawSignature, for: message) else {
                throw ManagerError(.unauthorized, .signatureInvalid, "the device signature does not verify")
            }
            guard try await sql.raw("""
                UPDATE authentications SET challenge = NULL WHERE id = \(bind: request.authenticationId) AND challenge = \(bind: challenge) RETURNING id
                """).first() != nil else {
                throw ManagerError(.conflict, .challengeInvalid, "the challenge was already used")
            }
            return (device.id, device.activationId, try row.decode(column: "service", as: String.self),
                    try row.decode(column: "merge_session_id", as: String?.self))
        }
        let service = try service(authentication.service)
        guard let role = service.roles.first(where: { $0.name == request.role }) else {
            throw ManagerError.badRequest("the service \(service.id) has no role '\(request.role.prefix(64))'")
        }
        let given = Set(request.factors)
        guard role.requestedAuthenticators.contains(where: { Set($0) == given }) else {
            throw ManagerError.badRequest("the factors \(request.factors.map(\.rawValue)) match no combination role \(role.name) accepts")
        }
        guard given.isSubset(of: Self.enrolledFactors) else {
            throw ManagerError.badRequest("this device has not enrolled \(given.subtracting(Self.enrolledFactors).map(\.rawValue).sorted().joined(separator: ", "))")
        }
        let missing = try await checkAttributes(request, service: service, activationId: authentication.activation)

        var result = AuthenticationResultMessage(nonce: request.nonce, outcome: .serviceLogin)
        if given.contains(.pin) {
            guard let pin = request.pin, !pin.isEmpty else { throw ManagerError.badRequest("role \(role.name) needs the PIN factor") }
            let verdict = try await checkPIN(pin, activationId: authentication.activation) { activation in
                guard let activation, activation.deviceId == authentication.device else {
                    throw ManagerError(.notFound, .deviceNotFound, "this device no longer holds its activation; personalize again")
                }
                return activation
            }
            if let lock = verdict.lockout {
                result.outcome = .lockout
                result.lockout = lock
                if !lock.isPermanent {
                    // The next attempt, after the lock, signs a fresh challenge; the previous signatures are spent.
                    let next = try SecureRandom.token()
                    let expiresAt = max(lock.lockedUntil, Self.now()) + configuration.sessionLifetimeMilliseconds
                    try await database.transaction { sql in
                        try await sql.raw("""
                            UPDATE authentications SET challenge = \(bind: next), expires_at = \(bind: expiresAt) WHERE id = \(bind: request.authenticationId)
                            """).run()
                    }
                    result.nextChallenge = next
                }
                return try sign(result, type: SignedAnswerType.authenticationResult)
            }
        }
        if let mergeSession = authentication.mergeSession {
            result.outcome = .mergeComplete
            result.mergedEmail = try await merge(session: mergeSession, into: authentication.activation)
            return try sign(result, type: SignedAnswerType.authenticationResult)
        }
        let code = try SecureRandom.token()
        let codeIssuedAt = Self.now()
        let codeExpiresAt = codeIssuedAt + 60_000
        let values = String(decoding: try JSONEncoder.canonical.encode(missing), as: UTF8.self)
        try await database.transaction { sql in
            try await sql.raw("""
                UPDATE authentications SET role = \(bind: role.name), code = \(bind: code), code_expires_at = \(bind: codeExpiresAt),
                       attributes = \(bind: values) WHERE id = \(bind: request.authenticationId)
                """).run()
        }
        result.serviceLogin = ServiceLoginMessage(
            authorizationCode: code, issuedAt: codeIssuedAt, expiresAt: codeExpiresAt, service: service.id, relyingPartyName: service.relyingPartyName, role: role.name
        )
        logger.info("authenticated", metadata: ["device": "\(authentication.device)", "service": "\(service.id)", "role": "\(role.name)"])
        return try sign(result, type: SignedAnswerType.authenticationResult)
    }

    /// The invite's address joins the confirming device's account; the temporary account and its activation go.
    private func merge(session: String, into activationId: String) async throws -> String {
        try await database.transaction { sql in
            guard let invite = try await sql.raw("""
                SELECT c.id, c.email FROM personalization_sessions s JOIN activations a ON a.id = s.activation_id JOIN accounts c ON c.id = a.account_id
                WHERE s.id = \(bind: session) AND s.outcome = 'mergePersonalization' AND c.is_temporary = 1
                """).first(), let target = try await sql.raw("SELECT account_id FROM activations WHERE id = \(bind: activationId)").first() else {
                throw ManagerError(.conflict, .sessionInvalid, "the invite was merged or activated meanwhile")
            }
            let email = try invite.decode(column: "email", as: String.self)
            try await sql.raw("DELETE FROM accounts WHERE id = \(bind: try invite.decode(column: "id", as: String.self))").run()
            try await sql.raw("""
                INSERT INTO account_emails (email, account_id) VALUES (\(bind: email), \(bind: try target.decode(column: "account_id", as: String.self)))
                """).run()
            self.logger.info("organization invite merged", metadata: ["email": "\(email)"])
            return email
        }
    }

    /// Checks the attribute part of a finish request; returns the values given for missing data.
    private func checkAttributes(_ request: AuthenticationFinishRequest, service: ManagerConfiguration.Service, activationId: String) async throws -> [String: String] {
        let known = try await database.transaction { sql in try await self.accountAttributes(activationId: activationId, on: sql) }
        var errors: [String: AuthenticationAttributeErrorCode] = [:]
        for attribute in service.attributes {
            if let value = request.attributeValues[attribute.name] {
                let verdict = attribute.name == "email" ? EmailValidator.validate(value) : TextAttributeValidator.validate(value)
                if verdict != .valid { errors[attribute.name] = .invalid }
            } else if known[attribute.name] == nil && attribute.isRequired {
                errors[attribute.name] = .dataMissing
            }
        }
        for name in request.attributeValues.keys where !service.attributes.contains(where: { $0.name == name }) { errors[name] = .notAvailable }
        guard errors.isEmpty else {
            throw ManagerError(.unprocessableContent, .attributesRejected, "attributes are missing or invalid; correct those in authenticationAttributes and start again",
                               authenticationAttributes: errors)
        }
        return request.attributeValues
    }

    /// Exchanges a single-use authorization code for the login token.
    public func token(_ request: TokenRequest) async throws -> String {
        guard request.authorizationCode.utf8.count <= 128, (1...128).contains(request.nonce.utf8.count) else {
            throw ManagerError.badRequest("a field of the token request is empty or too long")
        }
        let now = Self.now()
        let token = try await database.transaction { sql -> LoginTokenMessage in
            guard let row = try await sql.raw("""
                UPDATE authentications SET code = NULL
                WHERE code = \(bind: request.authorizationCode) AND code_expires_at > \(bind: now)
                RETURNING device_id, activation_id, service, role, host, local_user, attributes
                """).first() else {
                throw ManagerError(.conflict, .challengeInvalid, "the authorization code is unknown, expired or was used")
            }
            let device = try await self.enrolledDevice(try row.decode(column: "device_id", as: String.self), on: sql)
            let service = try self.service(try row.decode(column: "service", as: String.self))
            var values = try await self.accountAttributes(activationId: device.activationId, on: sql)
            let given = (try? JSONDecoder().decode([String: String].self, from: Data((try row.decode(column: "attributes", as: String?.self) ?? "{}").utf8))) ?? [:]
            values.merge(given) { _, new in new }
            return LoginTokenMessage(
                nonce: request.nonce, subject: values["email"] ?? "", deviceId: device.id, activationId: device.activationId, service: service.id,
                role: try row.decode(column: "role", as: String.self), host: try row.decode(column: "host", as: String.self),
                localUser: try row.decode(column: "local_user", as: String.self),
                attributes: values.filter { key, _ in service.attributes.contains { $0.name == key } },
                issuedAt: now, expiresAt: now + service.tokenLifetimeMilliseconds
            )
        }
        return try sign(token, type: SignedAnswerType.loginToken)
    }
}
