import Foundation
import Logging
import NIOConcurrencyHelpers
import SQLKit
import XignCrypto
import XignProtocol

/// The identity manager's behaviour, independent of HTTP: the HTTP routes and `xign-manager admin` both call it.
public final class IdentityManager: Sendable {
    public let configuration: ManagerConfiguration
    public let database: Database
    let secrets: ManagerSecrets
    let outbox: Outbox
    let logger: Logger
    /// The manager's public key and its fingerprint, computed once.
    let publicKey: P256PublicKey
    private let boundURL = NIOLockedValueBox<ManagerURL?>(nil)
    /// Queues this process's PIN checks per activation (IdentityManager+PINCheck).
    let pinChecks = KeyedAsyncLock()
    /// Wakes the relay loop when mail was queued.
    private let mailQueued: AsyncStream<Void>.Continuation
    private let mailQueue: AsyncStream<Void>

    public init(configuration: ManagerConfiguration, database: Database, secrets: ManagerSecrets, logger: Logger) throws {
        self.configuration = configuration
        self.database = database
        self.secrets = secrets
        self.outbox = Outbox(path: configuration.outboxPath)
        self.logger = logger
        self.publicKey = try secrets.signingKey.publicKey
        (mailQueue, mailQueued) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Opens the store and the secrets named in `configuration`; the owner of the process sets umask 077 first.
    public static func open(configuration: ManagerConfiguration, logger: Logger) async throws -> IdentityManager {
        try AtomicFile.makeDirectory(AtomicFile.parent(of: configuration.databasePath))
        let secrets = try ManagerSecrets.loadOrCreate(signingKeyPath: configuration.signingKeyPath, pepperPath: configuration.pepperPath)
        let database = try await Database.openSQLite(path: configuration.databasePath, logger: logger)
        let manager = try IdentityManager(configuration: configuration, database: database, secrets: secrets, logger: logger)
        try await manager.loadBoundURL()
        return manager
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    /// The URL the activation data names: the configured public URL, else the address actually bound.
    public var managerURL: ManagerURL { configuration.publicURL ?? boundURL.withLockedValue { $0 } ?? configuration.effectivePublicURL }

    /// Called once the server listens, so that port 0 ("any free port") still yields a usable URL.
    /// The URL is kept in the database, so `xign-manager admin` names the same one in the mail it sends.
    public func didBind(host: String, port: Int) async throws {
        let host = host.contains(":") ? "[\(host)]" : host
        let url = try ManagerURL("http://\(host):\(port)")
        boundURL.withLockedValue { $0 = url }
        try await database.transaction { sql in
            try await sql.raw("""
                INSERT INTO manager_settings (name, value) VALUES ('bound_url', \(bind: url.description))
                ON CONFLICT (name) DO UPDATE SET value = excluded.value
                """).run()
        }
    }

    private func loadBoundURL() async throws {
        let stored = try await database.transaction { sql in
            try await sql.raw("SELECT value FROM manager_settings WHERE name = 'bound_url'").first()?.decode(column: "value", as: String.self)
        }
        boundURL.withLockedValue { $0 = stored.flatMap { try? ManagerURL($0) } }
    }

    public func health() -> HealthMessage {
        HealthMessage(status: "ok", version: XignManagerVersion.string, managerKeyFingerprint: publicKey.fingerprint)
    }

    // MARK: Registration

    public func registrationParameters(serviceMappingId: String?) -> RegistrationParametersMessage {
        RegistrationParametersMessage(
            pinSpec: configuration.pinPolicy,
            categories: configuration.categories.map { category in
                CategoryMessage(
                    id: category.id, types: category.types, attributes: category.attributes,
                    identificationAttributes: category.attributes.filter(\.isRequired).map(\.name)
                )
            },
            alias: configuration.aliasPolicy,
            serviceMappingId: serviceMappingId.flatMap { configuration.linkedServices.contains($0) ? $0 : nil }
        )
    }

    public func register(_ request: RegisterRequest) async throws -> RegisterResponse {
        guard let category = configuration.categories.first(where: { $0.id == request.categoryId }) else {
            throw ManagerError.badRequest("unknown category '\(request.categoryId.prefix(40))'; fetch the registration parameters again")
        }
        var errors: [String: AttributeErrorCode] = [:]
        let allowed = Set(category.attributes.map(\.name))
        for name in request.attributes.keys where !allowed.contains(name) { errors[name] = .invalid }
        for attribute in category.attributes {
            let value = request.attributes[attribute.name] ?? ""
            if value.isEmpty {
                if attribute.isRequired { errors[attribute.name] = .required }
                continue
            }
            let verdict = attribute.name == "email" ? EmailValidator.validate(value) : TextAttributeValidator.validate(value)
            if verdict != .valid { errors[attribute.name] = .invalid }
        }
        let pinVerdict = configuration.pinPolicy.validate(request.pin)
        if pinVerdict != .valid { errors["pin"] = .invalid }
        if let alias = request.alias, configuration.aliasPolicy.validate(alias) != .valid { errors["alias"] = .invalid }
        let arbitrary = request.arbitraryUserAttributes ?? [:]
        guard arbitrary.count <= 32, arbitrary.allSatisfy({ $0.key.utf8.count <= 64 && $0.value.utf8.count <= 1024 }) else {
            throw ManagerError.badRequest("arbitraryUserAttributes allows at most 32 entries, keys up to 64 and values up to 1024 bytes")
        }
        guard let email = request.attributes["email"]?.lowercased(), !email.isEmpty else {
            throw ManagerError(.unprocessableContent, .registrationRejected, "an email address is required", attributes: errors.merging(["email": .required]) { a, _ in a })
        }
        if errors["email"] == nil {
            let blocked = configuration.blockedDomains.contains(String(email.split(separator: "@").last ?? ""))
            if blocked { errors["email"] = .notAvailable } else if try await accountExists(email: email) { errors["email"] = .notAvailable }
        }
        guard errors.isEmpty else {
            throw ManagerError(
                .unprocessableContent, .registrationRejected, "the registration was rejected; correct the attributes marked in 'attributes'",
                attributes: errors, pinError: pinVerdict == .valid ? nil : pinVerdict.rawValue
            )
        }
        // Attributes for a linked service are kept until the first personalization; without one they are dropped now.
        let keepArbitrary = request.serviceMappingId.map { configuration.linkedServices.contains($0) } ?? false
        let account = NewAccount(
            email: email,
            attributes: request.attributes.filter { $0.key != "email" },
            arbitraryAttributes: keepArbitrary && !arbitrary.isEmpty ? arbitrary : nil,
            serviceMappingId: keepArbitrary ? request.serviceMappingId : nil,
            organization: nil
        )
        let (payload, alias) = try await createAccount(account, pin: request.pin, alias: request.alias)
        try send(Outbox.activationMail(to: email, alias: alias, payload: payload))
        logger.info("registered account", metadata: ["email": "\(email)", "alias": "\(alias)"])
        return RegisterResponse(managerUrl: managerURL.description, activationAlias: alias)
    }

    struct NewAccount: Sendable {
        var email: String
        var attributes: [String: String]
        var arbitraryAttributes: [String: String]?
        var serviceMappingId: String?
        var organization: String?
    }

    private func accountExists(email: String) async throws -> Bool {
        try await database.transaction { sql in
            // An address merged into another account is as taken as an account's own.
            try await sql.raw("""
                SELECT email FROM accounts WHERE email = \(bind: email) UNION SELECT email FROM account_emails WHERE email = \(bind: email)
                """).first() != nil
        }
    }

    /// Creates an account with its first activation and returns the activation data.
    func createAccount(_ account: NewAccount, pin: String, alias: String?) async throws -> (PersonalizationPayload, String) {
        let accountId = try SecureRandom.identifier()
        let activation = try makeActivation(pin: pin)
        let chosenAlias = alias ?? "Activation 1"
        let attributes = String(decoding: try JSONEncoder.canonical.encode(account.attributes), as: UTF8.self)
        let arbitrary = try account.arbitraryAttributes.map { String(decoding: try JSONEncoder.canonical.encode($0), as: UTF8.self) }
        let now = Self.now()
        do {
            try await database.transaction { sql in
                try await sql.raw("""
                    INSERT INTO accounts (id, email, attributes, arbitrary_attributes, service_mapping_id, organization, is_temporary, created_at)
                    VALUES (\(bind: accountId), \(bind: account.email), \(bind: attributes), \(bind: arbitrary), \(bind: account.serviceMappingId),
                            \(bind: account.organization), \(bind: account.organization == nil ? 0 : 1), \(bind: now))
                    """).run()
                try await self.insertActivation(activation, accountId: accountId, alias: chosenAlias, deviceId: nil, on: sql)
            }
        } catch let error as ManagerError {
            throw error
        } catch {
            // The UNIQUE constraint on email lost a race against a concurrent registration.
            if try await accountExists(email: account.email) {
                throw ManagerError(.unprocessableContent, .registrationRejected, "the email address is already registered", attributes: ["email": .notAvailable])
            }
            throw error
        }
        return (payload(for: activation), chosenAlias)
    }

    struct ActivationSecrets: Sendable {
        var id: String
        var secret: String
        var pinSalt: Data
        var pinVerifier: Data
        var iterations: Int
    }

    private func makeActivation(pin: String) throws -> ActivationSecrets {
        let salt = try SecureRandom.bytes(16)
        return ActivationSecrets(
            id: try SecureRandom.identifier(),
            secret: try SecureRandom.token(byteCount: 32),
            pinSalt: salt,
            pinVerifier: try secrets.pinVerifier(pin: pin, salt: salt, iterations: configuration.pinHashIterations),
            iterations: configuration.pinHashIterations
        )
    }

    private func insertActivation(_ activation: ActivationSecrets, accountId: String, alias: String, deviceId: String?, on sql: any SQLDatabase) async throws {
        let secretHash = Base64URL.encode(SHA256.hash(activation.secret))
        try await sql.raw("""
            INSERT INTO activations (id, account_id, alias, secret_hash, pin_salt, pin_verifier, pin_iterations, state, device_id,
                                     ever_personalized, failed_attempts, locked_until, permanently_locked, created_at)
            VALUES (\(bind: activation.id), \(bind: accountId), \(bind: alias), \(bind: secretHash), \(bind: Base64URL.encode(activation.pinSalt)),
                    \(bind: Base64URL.encode(activation.pinVerifier)), \(bind: activation.iterations), \(bind: deviceId == nil ? "pending" : "personalized"),
                    \(bind: deviceId), \(bind: deviceId == nil ? 0 : 1), 0, 0, 0, \(bind: Self.now()))
            """).run()
    }

    func payload(for activation: ActivationSecrets) -> PersonalizationPayload {
        PersonalizationPayload(
            managerURL: managerURL, activationId: activation.id, activationSecret: activation.secret,
            managerKeyFingerprint: publicKey.fingerprint
        )
    }

    // MARK: Personalization

    struct ActivationRow: Sendable {
        var id: String
        var accountId: String
        var alias: String
        var secretHash: String
        var pinSalt: String
        var pinVerifier: String
        var pinIterations: Int
        var state: String
        var deviceId: String?
        var everPersonalized: Bool
        var failedAttempts: Int
        var lockedUntil: Int64
        var permanentlyLocked: Bool
        /// While a PIN check runs: when its claim runs out (0 when none runs).
        var pinCheckUntil: Int64
        var email: String
        var isTemporary: Bool
        var organization: String?

        init(_ row: any SQLRow) throws {
            id = try row.decode(column: "id", as: String.self)
            accountId = try row.decode(column: "account_id", as: String.self)
            alias = try row.decode(column: "alias", as: String.self)
            secretHash = try row.decode(column: "secret_hash", as: String.self)
            pinSalt = try row.decode(column: "pin_salt", as: String.self)
            pinVerifier = try row.decode(column: "pin_verifier", as: String.self)
            pinIterations = try row.decode(column: "pin_iterations", as: Int.self)
            state = try row.decode(column: "state", as: String.self)
            deviceId = try row.decode(column: "device_id", as: String?.self)
            everPersonalized = try row.decode(column: "ever_personalized", as: Int.self) != 0
            failedAttempts = try row.decode(column: "failed_attempts", as: Int.self)
            lockedUntil = try row.decode(column: "locked_until", as: Int64.self)
            permanentlyLocked = try row.decode(column: "permanently_locked", as: Int.self) != 0
            pinCheckUntil = try row.decode(column: "pin_check_until", as: Int64.self)
            email = try row.decode(column: "email", as: String.self)
            isTemporary = try row.decode(column: "is_temporary", as: Int.self) != 0
            organization = try row.decode(column: "organization", as: String?.self)
        }

        var pendingLock: LockoutMessage? {
            let now = IdentityManager.now()
            if permanentlyLocked { return LockoutMessage(isPermanent: true, lockedUntil: lockedUntil, failedAttempts: failedAttempts, issuedAt: now) }
            if lockedUntil > now { return LockoutMessage(isPermanent: false, lockedUntil: lockedUntil, failedAttempts: failedAttempts, issuedAt: now) }
            return nil
        }
    }

    static let activationColumns = """
        a.id, a.account_id, a.alias, a.secret_hash, a.pin_salt, a.pin_verifier, a.pin_iterations, a.state, a.device_id,
        a.ever_personalized, a.failed_attempts, a.locked_until, a.permanently_locked, a.pin_check_until, c.email, c.is_temporary, c.organization
        """

    func activation(id: String, on sql: any SQLDatabase) async throws -> ActivationRow? {
        try await sql.raw("SELECT \(unsafeRaw: Self.activationColumns) FROM activations a JOIN accounts c ON c.id = a.account_id WHERE a.id = \(bind: id)")
            .first().map(ActivationRow.init)
    }

    /// Answers the activation PIN check of a personalization with one of the five outcomes.
    public func decrypt(_ request: DecryptRequest) async throws -> String {
        guard request.activationId.utf8.count <= 64, request.activationSecret.utf8.count <= 64, request.pin.utf8.count <= 64,
              request.nonce.utf8.count <= 128, !request.nonce.isEmpty, request.knownDeviceIds.count <= 64,
              request.knownDeviceIds.allSatisfy({ $0.utf8.count <= 64 }) else {
            throw ManagerError.badRequest("a field of the decrypt request is empty or too long")
        }
        let presentedSecretHash = Data(Base64URL.encode(SHA256.hash(request.activationSecret)).utf8)
        let verdict = try await checkPIN(request.pin, activationId: request.activationId) { activation in
            guard let activation, constantTimeEquals(Data(activation.secretHash.utf8), presentedSecretHash) else {
                throw ManagerError(.notFound, .activationNotFound, "no activation matches this activation data; check the link or register again")
            }
            return activation
        }
        let activation = verdict.activation
        if let lock = verdict.lockout {
            var locked = DecryptResult(nonce: request.nonce, outcome: .lockout, activationId: activation.id)
            locked.lockout = lock
            return try sign(locked, type: SignedAnswerType.decrypt, includeKey: true)
        }
        let known = Set(request.knownDeviceIds)
        let sessionLifetime = configuration.sessionLifetimeMilliseconds
        let result = try await database.transaction { sql -> DecryptResult in
            var result = DecryptResult(nonce: request.nonce, outcome: .newPersonalization, activationId: activation.id)
            result.accountEmail = activation.email
            result.activationAlias = activation.alias
            if activation.state == "personalized", let device = activation.deviceId, known.contains(device) {
                result.outcome = .alreadyPersonalized
                result.personalizedDeviceId = device
            } else if activation.everPersonalized {
                result.outcome = .rePersonalization
                result.personalizedDeviceId = activation.deviceId
                result.pinSpec = self.configuration.pinPolicy
                result.aliasSpec = self.configuration.aliasPolicy
                result.canSendEmail = true
            } else if activation.isTemporary, let merge = try await self.mergeCandidate(for: activation, known: known, on: sql) {
                result.outcome = .mergePersonalization
                result.merge = merge
            }
            let session = SessionMessage(id: try SecureRandom.identifier(), challenge: try SecureRandom.token(), expiresAt: Self.now() + sessionLifetime)
            try await sql.raw("""
                INSERT INTO personalization_sessions (id, activation_id, outcome, challenge, expires_at, merge_device_id)
                VALUES (\(bind: session.id), \(bind: activation.id), \(bind: result.outcome.rawValue), \(bind: session.challenge),
                        \(bind: session.expiresAt), \(bind: result.merge?.existingDeviceId))
                """).run()
            result.session = session
            return result
        }
        logger.info("activation PIN accepted", metadata: ["activation": "\(activation.id)", "outcome": "\(result.outcome.rawValue)"])
        return try sign(result, type: SignedAnswerType.decrypt, includeKey: true)
    }

    /// An organization invite scanned on a machine that already holds an activation of another, permanent account.
    private func mergeCandidate(for activation: ActivationRow, known: Set<String>, on sql: any SQLDatabase) async throws -> MergeMessage? {
        for deviceId in known.sorted() {
            let row = try await sql.raw("""
                SELECT c.email FROM devices d JOIN activations a ON a.id = d.activation_id JOIN accounts c ON c.id = a.account_id
                WHERE d.id = \(bind: deviceId) AND d.revoked = 0 AND c.is_temporary = 0 AND c.id <> \(bind: activation.accountId)
                """).first()
            if let row {
                return MergeMessage(
                    existingDeviceId: deviceId, existingAccountEmail: try row.decode(column: "email", as: String.self),
                    invitedEmail: activation.email, organization: activation.organization ?? ""
                )
            }
        }
        return nil
    }

    static let maximumBodySize = 16 * 1024

    /// Finishes a personalization. The request is signed with the new device key over the session's challenge,
    /// which is consumed in the same transaction, so a replay finds no challenge.
    public func personalize(body: Data, signature: String?) async throws -> String {
        let request: PersonalizeRequest
        do { request = try JSONDecoder().decode(PersonalizeRequest.self, from: body) } catch {
            throw ManagerError.badRequest("the personalization request is not valid JSON of the expected shape")
        }
        guard request.nonce.utf8.count <= 128, !request.nonce.isEmpty, request.device.name.utf8.count <= 128,
              request.device.platform.utf8.count <= 128, request.sessionId.utf8.count <= 64 else {
            throw ManagerError.badRequest("a field of the personalization request is empty or too long")
        }
        guard let keyBytes = Base64URL.decode(request.deviceKey), let deviceKey = try? P256PublicKey(derRepresentation: keyBytes) else {
            throw ManagerError.badRequest("deviceKey is not a base64url P-256 SubjectPublicKeyInfo")
        }
        let rawSignature = try Self.signature(from: signature)
        if configuration.requireHardwareKey && request.keyKind == .software {
            throw ManagerError(.forbidden, .securityInsufficient, "this manager accepts only hardware-bound (TPM) device keys; enable the TPM and personalize again")
        }
        var newActivation: ActivationSecrets?
        if request.mode == .newActivation {
            guard let trigger = request.newActivation else { throw ManagerError.badRequest("mode newActivation needs newActivation with a PIN") }
            let verdict = configuration.pinPolicy.validate(trigger.pin)
            guard verdict == .valid else {
                throw ManagerError(.unprocessableContent, .pinPolicy, "the new activation PIN does not meet the PIN policy (\(verdict.rawValue))", pinError: verdict.rawValue)
            }
            if let alias = trigger.alias, configuration.aliasPolicy.validate(alias) != .valid {
                throw ManagerError(.unprocessableContent, .registrationRejected, "the alias does not meet the alias policy", attributes: ["alias": .invalid])
            }
            newActivation = try makeActivation(pin: trigger.pin)
        }
        let deviceId = try SecureRandom.identifier()
        let frozenNewActivation = newActivation
        let (result, mail) = try await database.transaction { sql -> (PersonalizationResultMessage, Outbox.Mail?) in
            guard let session = try await sql.raw("""
                SELECT activation_id, outcome, challenge, expires_at FROM personalization_sessions WHERE id = \(bind: request.sessionId)
                """).first() else {
                throw ManagerError(.conflict, .sessionInvalid, "the personalization session is unknown or was used; start again from the activation data")
            }
            let challenge = try session.decode(column: "challenge", as: String.self)
            guard try session.decode(column: "expires_at", as: Int64.self) > Self.now() else {
                throw ManagerError(.conflict, .sessionInvalid, "the personalization session expired; start again from the activation data")
            }
            let message = SignedRequest.canonicalMessage(method: "POST", path: APIPath.personalizations, body: body, challenge: challenge)
            guard deviceKey.isValidSignature(rawSignature, for: message) else {
                throw ManagerError(.unauthorized, .signatureInvalid, "the device signature does not verify")
            }
            let consumed = try await sql.raw("""
                DELETE FROM personalization_sessions WHERE id = \(bind: request.sessionId) AND challenge = \(bind: challenge) RETURNING id
                """).first()
            guard consumed != nil else { throw ManagerError(.conflict, .challengeInvalid, "the challenge was already used") }
            let outcome = PersonalizationOutcome(rawValue: try session.decode(column: "outcome", as: String.self))
            let allowed: Bool
            switch request.mode {
            case .new: allowed = outcome == .newPersonalization || outcome == .mergePersonalization
            case .override: allowed = outcome == .rePersonalization || outcome == .alreadyPersonalized
            case .newActivation: allowed = outcome == .rePersonalization
            }
            guard allowed else {
                throw ManagerError(.conflict, .sessionInvalid, "mode \(request.mode.rawValue) does not continue a \(outcome?.rawValue ?? "?") session")
            }
            guard var activation = try await self.activation(id: try session.decode(column: "activation_id", as: String.self), on: sql),
                  activation.state != "revoked", !activation.permanentlyLocked else {
                throw ManagerError(.gone, .activationRevoked, "this activation was removed or locked meanwhile")
            }
            var mail: Outbox.Mail?
            if let fresh = frozenNewActivation {
                let count = try await sql.raw("SELECT COUNT(*) AS n FROM activations WHERE account_id = \(bind: activation.accountId)")
                    .first()?.decode(column: "n", as: Int.self) ?? 0
                let alias = request.newActivation?.alias ?? "Activation \(count + 1)"
                try await self.insertActivation(fresh, accountId: activation.accountId, alias: alias, deviceId: deviceId, on: sql)
                if request.newActivation?.shouldSendEmail == true {
                    mail = Outbox.activationMail(to: activation.email, alias: alias, payload: self.payload(for: fresh), backup: true)
                }
                activation.id = fresh.id
                activation.alias = alias
            } else {
                try await sql.raw("UPDATE devices SET revoked = 1 WHERE activation_id = \(bind: activation.id)").run()
                try await sql.raw("""
                    UPDATE activations SET state = 'personalized', device_id = \(bind: deviceId), ever_personalized = 1 WHERE id = \(bind: activation.id)
                    """).run()
                try await self.finishFirstPersonalization(accountId: activation.accountId, on: sql)
            }
            try await sql.raw("""
                INSERT INTO devices (id, activation_id, public_key, key_kind, name, platform, revoked, created_at)
                VALUES (\(bind: deviceId), \(bind: activation.id), \(bind: request.deviceKey), \(bind: request.keyKind.rawValue),
                        \(bind: request.device.name), \(bind: request.device.platform), 0, \(bind: Self.now()))
                """).run()
            let result = PersonalizationResultMessage(
                nonce: request.nonce, deviceId: deviceId, activationId: activation.id, activationAlias: activation.alias,
                accountEmail: activation.email, deviceKey: request.deviceKey
            )
            return (result, mail)
        }
        if let mail { try send(mail) }
        logger.info("device personalized", metadata: [
            "activation": "\(result.activationId)", "device": "\(deviceId)", "mode": "\(request.mode.rawValue)", "keyKind": "\(request.keyKind.rawValue)",
        ])
        return try sign(result, type: SignedAnswerType.personalization)
    }

    /// The account is permanent from now on; attributes kept for a linked service are handed over and deleted.
    private func finishFirstPersonalization(accountId: String, on sql: any SQLDatabase) async throws {
        try await sql.raw("UPDATE accounts SET is_temporary = 0 WHERE id = \(bind: accountId)").run()
        guard let row = try await sql.raw("""
            SELECT arbitrary_attributes, service_mapping_id FROM accounts WHERE id = \(bind: accountId) AND arbitrary_attributes IS NOT NULL
            """).first() else { return }
        let attributes = try row.decode(column: "arbitrary_attributes", as: String.self)
        if let service = try row.decode(column: "service_mapping_id", as: String?.self), configuration.linkedServices.contains(service) {
            let directory = "\(outbox.path)/linked/\(service)"
            try AtomicFile.makeDirectory(directory, mode: 0o700)
            try AtomicFile.write(Data(attributes.utf8), to: "\(directory)/\(accountId).json", mode: 0o600)
        }
        try await sql.raw("UPDATE accounts SET arbitrary_attributes = NULL WHERE id = \(bind: accountId)").run()
    }

    // MARK: Device-signed requests

    public func challenge(for request: ChallengeRequest) async throws -> ChallengeMessage {
        guard request.deviceId.utf8.count <= 64 else { throw ManagerError.badRequest("deviceId is too long") }
        let challenge = ChallengeMessage(challenge: try SecureRandom.token(), expiresAt: Self.now() + configuration.sessionLifetimeMilliseconds)
        try await database.transaction { sql in
            guard try await sql.raw("SELECT id FROM devices WHERE id = \(bind: request.deviceId) AND revoked = 0").first() != nil else {
                throw ManagerError(.notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager")
            }
            try await sql.raw("DELETE FROM device_challenges WHERE expires_at < \(bind: Self.now())").run()
            try await sql.raw("""
                INSERT INTO device_challenges (challenge, device_id, expires_at)
                VALUES (\(bind: challenge.challenge), \(bind: request.deviceId), \(bind: challenge.expiresAt))
                """).run()
        }
        return challenge
    }

    /// Verifies a request signed by an enrolled device and consumes its challenge. Returns the device's activation id.
    private func verifyDeviceSignature(deviceId: String, challenge: String, path: String, body: Data, signature: String?, on sql: any SQLDatabase) async throws -> String {
        let raw = try Self.signature(from: signature)
        guard let device = try await sql.raw("SELECT public_key, activation_id FROM devices WHERE id = \(bind: deviceId) AND revoked = 0").first() else {
            throw ManagerError(.notFound, .deviceNotFound, "this device is not enrolled (or was removed) at this manager")
        }
        guard let keyBytes = Base64URL.decode(try device.decode(column: "public_key", as: String.self)),
              let key = try? P256PublicKey(derRepresentation: keyBytes) else {
            throw ManagerError.internalFailure("stored key of device \(deviceId) is corrupt")
        }
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        guard key.isValidSignature(raw, for: message) else {
            throw ManagerError(.unauthorized, .signatureInvalid, "the device signature does not verify")
        }
        guard try await sql.raw("""
            DELETE FROM device_challenges WHERE challenge = \(bind: challenge) AND device_id = \(bind: deviceId) AND expires_at > \(bind: Self.now()) RETURNING device_id
            """).first() != nil else {
            throw ManagerError(.conflict, .challengeInvalid, "the challenge is unknown, expired or was already used; request a new one")
        }
        return try device.decode(column: "activation_id", as: String.self)
    }

    /// Removes a device and finishes its activation, signed by the device itself (`xign-setup remove`).
    public func revoke(body: Data, signature: String?) async throws -> String {
        let request: RevokeRequest
        do { request = try JSONDecoder().decode(RevokeRequest.self, from: body) } catch {
            throw ManagerError.badRequest("the revocation request is not valid JSON of the expected shape")
        }
        guard request.nonce.utf8.count <= 128, request.challenge.utf8.count <= 128, request.deviceId.utf8.count <= 64 else {
            throw ManagerError.badRequest("a field of the revocation request is too long")
        }
        try await database.transaction { sql in
            let activationId = try await self.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.deviceRevocations, body: body, signature: signature, on: sql
            )
            try await sql.raw("UPDATE devices SET revoked = 1 WHERE id = \(bind: request.deviceId)").run()
            try await sql.raw("UPDATE activations SET state = 'revoked', device_id = NULL WHERE id = \(bind: activationId)").run()
        }
        logger.info("device revoked", metadata: ["device": "\(request.deviceId)"])
        return try sign(RevocationResultMessage(nonce: request.nonce, deviceId: request.deviceId), type: SignedAnswerType.revocation)
    }

    // MARK: Mail

    /// Queues mail in the outbox (durable), then wakes the SMTP relay loop if one runs.
    func send(_ mail: Outbox.Mail) throws {
        try outbox.deliver(mail, from: configuration.mailFrom)
        mailQueued.yield()
    }

    /// Feeds the outbox to the configured SMTP relay: at start, whenever mail is queued, and every
    /// `interval` for mail a failed round left behind. Returns at once without a relay; runs until cancelled.
    public func relayMail(every interval: Duration = .seconds(30)) async {
        guard let relayAddress = configuration.smtpRelay, let relay = try? SMTPRelay(relayAddress) else { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    self.mailQueued.yield()
                    try? await Task.sleep(for: interval)
                }
            }
            group.addTask {
                for await _ in self.mailQueue {
                    do {
                        let sent = try await self.outbox.flush(through: relay, from: self.configuration.mailFrom)
                        if sent > 0 { self.logger.info("mail relayed", metadata: ["count": "\(sent)", "relay": "\(relayAddress)"]) }
                    } catch {
                        self.logger.warning("mail stays in the outbox: \(error)")
                    }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// The raw r || s of a device-signed request's signature header.
    static func signature(from header: String?) throws -> Data {
        guard let header, let raw = Base64URL.decode(header) else {
            throw ManagerError(.unauthorized, .signatureInvalid, "the request carries no valid \(SignedRequest.signatureHeader) header")
        }
        return raw
    }

    func sign(_ value: some Encodable, type: String, includeKey: Bool = false) throws -> String {
        let header = JWS.Header(typ: type, kid: publicKey.fingerprint, spki: includeKey ? Base64URL.encode(publicKey.derRepresentation) : nil)
        return try JWS.sign(payload: try JSONEncoder.canonical.encode(value), header: header, with: secrets.signingKey)
    }
}

public enum XignManagerVersion {
    public static let string = "0.1.0"
}
