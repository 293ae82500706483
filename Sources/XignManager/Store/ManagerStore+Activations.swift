import SQLKit
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// Activations: the PIN verifier, the lockout and which device holds each.
extension ManagerStore {
    struct NewActivation: Sendable {
        var id: String
        var accountId: String
        var alias: String
        var secretHash: String
        var pinSalt: String
        var pinVerifier: String
        var pinIterations: Int
        var pinPepper: PINPepperKind
        /// nil while the activation waits for its first personalization.
        var deviceId: String?
        /// Until when the secret opens the activation; 0 for one that is personalized as it is made.
        var secretValidUntil: Int64
        var createdAt: Int64
    }

    struct ActivationRecord: Sendable {
        var id: String
        var accountId: String
        var alias: String
        var secretHash: String
        /// Until when the secret opens the activation; 0 once a personalization used it.
        var secretValidUntil: Int64
        var pinSalt: String
        var pinVerifier: String
        var pinIterations: Int
        var pinPepper: PINPepperKind
        var state: ActivationState
        var deviceId: String?
        var everPersonalized: Bool
        var failedAttempts: Int
        var lockedUntil: Int64
        var permanentlyLocked: Bool
        /// While a PIN check runs: when its claim runs out (0 when none runs).
        var pinCheckUntil: Int64
        /// The instance whose claim that is.
        var pinCheckBy: String?
        var email: String
        var isTemporary: Bool
        var organization: String?
        /// Moves with every PIN change (offline verifiers of another generation are deleted).
        var pinGeneration: Int64
        /// The account's own offline policy; nil: the manager's.
        var offlineGraceMilliseconds: Int64?
        var offlineMaxFailures: Int?
        /// An administrator locked the account (when); nil while it is not locked.
        var accountLockedAt: Int64?
        /// The account's login name and registered attributes (JSON), read with the row; `accountAttributes` decodes them
        /// when asked, which only a start does, not the PIN check's reads.
        var accountLoginName: String?
        var accountAttributesJSON: String

        init(_ row: any SQLRow) throws {
            id = try row.decode(column: "id", as: String.self)
            accountId = try row.decode(column: "account_id", as: String.self)
            alias = try row.decode(column: "alias", as: String.self)
            secretHash = try row.decode(column: "secret_hash", as: String.self)
            secretValidUntil = try row.decode(column: "secret_valid_until", as: Int64.self)
            pinSalt = try row.decode(column: "pin_salt", as: String.self)
            pinVerifier = try row.decode(column: "pin_verifier", as: String.self)
            pinIterations = try row.decode(column: "pin_iterations", as: Int.self)
            pinPepper = try row.decode(enumColumn: "pin_pepper", as: PINPepperKind.self)
            state = try row.decode(enumColumn: "state", as: ActivationState.self)
            deviceId = try row.decode(column: "device_id", as: String?.self)
            everPersonalized = try row.decode(column: "ever_personalized", as: Int.self) != 0
            failedAttempts = try row.decode(column: "failed_attempts", as: Int.self)
            lockedUntil = try row.decode(column: "locked_until", as: Int64.self)
            permanentlyLocked = try row.decode(column: "permanently_locked", as: Int.self) != 0
            pinCheckUntil = try row.decode(column: "pin_check_until", as: Int64.self)
            pinCheckBy = try row.decode(column: "pin_check_by", as: String?.self)
            email = try row.decode(column: "email", as: String.self)
            isTemporary = try row.decode(column: "is_temporary", as: Int.self) != 0
            organization = try row.decode(column: "organization", as: String?.self)
            pinGeneration = try row.decode(column: "pin_generation", as: Int64.self)
            offlineGraceMilliseconds = try row.decode(column: "offline_grace", as: Int64?.self)
            offlineMaxFailures = try row.decode(column: "offline_max_failures", as: Int?.self)
            accountLockedAt = try row.decode(column: "locked_at", as: Int64?.self)
            accountLoginName = try row.decode(column: "login_name", as: String?.self)
            accountAttributesJSON = try row.decode(column: "attributes", as: String.self)
        }

        /// The account's attributes as a service sees them: email, login name and the registered ones.
        var accountAttributes: [String: String] {
            ManagerStore.accountAttributes(email: email, loginName: accountLoginName, json: accountAttributesJSON)
        }

        var pendingLock: LockoutMessage? {
            let now = IdentityManager.now()
            if permanentlyLocked {
                return LockoutMessage(
                    isPermanent: true, lockedUntil: lockedUntil, failedAttempts: failedAttempts, issuedAt: now)
            }
            if lockedUntil > now {
                return LockoutMessage(
                    isPermanent: false, lockedUntil: lockedUntil, failedAttempts: failedAttempts, issuedAt: now)
            }
            return nil
        }
    }

    func activation(id: String) async throws -> ActivationRecord? {
        try await sql.raw("\(Self.activationColumns) WHERE a.id = \(bind: id)").first().map(ActivationRecord.init)
    }

    /// Activations a PIN check has claimed and not settled; with `instance`, only those that instance claimed.
    func activationsWithPINCheckClaims(by instance: String? = nil) async throws -> [ActivationRecord] {
        let owner = instance.map { SQLQueryString("AND a.pin_check_by = \(bind: $0)") } ?? SQLQueryString("")
        return try await sql.raw("\(Self.activationColumns) WHERE a.pin_check_until <> 0 \(owner)").all().map(
            ActivationRecord.init)
    }

    private static let activationColumns = SQLQueryString(
        """
        SELECT a.id, a.account_id, a.alias, a.secret_hash, a.secret_valid_until, a.pin_salt, a.pin_verifier, a.pin_iterations, a.pin_pepper, a.state, a.device_id,
               a.ever_personalized, a.failed_attempts, a.locked_until, a.permanently_locked, a.pin_check_until, a.pin_check_by,
               a.pin_generation,
               c.email, c.is_temporary, c.organization, c.offline_grace, c.offline_max_failures, c.locked_at,
               c.login_name, c.attributes
        FROM activations a JOIN accounts c ON c.id = a.account_id
        """)

    func insertActivation(_ activation: NewActivation) async throws {
        try await sql.raw(
            """
            INSERT INTO activations (id, account_id, alias, secret_hash, secret_valid_until, pin_salt, pin_verifier, pin_iterations, pin_pepper,
                                     state, device_id, ever_personalized, failed_attempts, locked_until, permanently_locked, created_at)
            VALUES (\(bind: activation.id), \(bind: activation.accountId), \(bind: activation.alias), \(bind: activation.secretHash),
                    \(bind: activation.secretValidUntil),
                    \(bind: activation.pinSalt), \(bind: activation.pinVerifier), \(bind: activation.pinIterations), \(bind: activation.pinPepper.rawValue),
                    \(bind: (activation.deviceId == nil ? ActivationState.pending : .personalized).rawValue), \(bind: activation.deviceId),
                    \(bind: activation.deviceId == nil ? 0 : 1), 0, 0, 0, \(bind: activation.createdAt))
            """
        ).run()
    }

    func activationCount(accountId: String) async throws -> Int {
        try await sql.raw("SELECT COUNT(*) AS n FROM activations WHERE account_id = \(bind: accountId)").first()?
            .decode(column: "n", as: Int.self)
            ?? 0
    }

    /// The activation moves to `deviceId`; every device that held it before is revoked.
    func personalize(activationId: String, deviceId: String) async throws {
        try await sql.raw("UPDATE devices SET revoked = 1 WHERE activation_id = \(bind: activationId)").run()
        try await sql.raw(
            """
            UPDATE activations SET state = 'personalized', device_id = \(bind: deviceId), ever_personalized = 1, secret_valid_until = 0
            WHERE id = \(bind: activationId)
            """
        ).run()
    }

    /// The new verifier for every activation of the account, or nil (nothing written) while a PIN check of one of them
    /// holds its claim: that check's verdict is about the old PIN, and must not land after the change.
    func setPIN(_ pin: PINVerifier, ofAccount accountId: String, now: Int64) async throws -> Int? {
        let count =
            try await sql.raw(
                "SELECT count(*) AS n FROM activations WHERE account_id = \(bind: accountId) AND state <> 'revoked'"
            ).first().map { try $0.decode(column: "n", as: Int.self) } ?? 0
        let changed = try await sql.raw(
            """
            UPDATE activations SET pin_salt = \(bind: Base64URL.encode(pin.salt)), pin_verifier = \(bind: Base64URL.encode(pin.value)),
                   pin_iterations = \(bind: pin.iterations), pin_pepper = \(bind: pin.pepper.rawValue), pin_generation = pin_generation + 1
            WHERE account_id = \(bind: accountId) AND state <> 'revoked' AND pin_check_until <= \(bind: now)
            RETURNING id
            """
        ).all().count
        return changed == count ? changed : nil
    }

    func markRevoked(activationId: String) async throws {
        try await sql.raw("UPDATE activations SET state = 'revoked', device_id = NULL WHERE id = \(bind: activationId)")
            .run()
    }

    // MARK: The PIN check (PINChecker)

    func claimPINCheck(activationId: String, until: Int64, by instance: String) async throws {
        try await sql.raw(
            """
            UPDATE activations SET pin_check_until = \(bind: until), pin_check_by = \(bind: instance) WHERE id = \(bind: activationId)
            """
        ).run()
    }

    /// A new secret for the activation, usable until `validUntil`; the one before it stops working.
    func replaceSecret(activationId: String, hash: String, validUntil: Int64) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE activations SET secret_hash = \(bind: hash), secret_valid_until = \(bind: validUntil)
            WHERE id = \(bind: activationId) AND state <> 'revoked' RETURNING id
            """
        ).first() != nil
    }

    func releasePINCheck(activationId: String) async throws {
        try await sql.raw("UPDATE activations SET pin_check_until = 0 WHERE id = \(bind: activationId)").run()
    }

    /// Writes a failure's lock and ends any claim.
    func recordPINFailure(_ lock: LockoutMessage, activationId: String) async throws {
        try await sql.raw(
            """
            UPDATE activations SET failed_attempts = \(bind: lock.failedAttempts), locked_until = \(bind: lock.lockedUntil),
                   permanently_locked = \(bind: lock.isPermanent ? 1 : 0), pin_check_until = 0 WHERE id = \(bind: activationId)
            """
        ).run()
    }

    /// Writes the lock of a wrong offline PIN, leaving any running check's claim alone (its verdict adds to this count).
    func chargeOfflineFailure(_ lock: LockoutMessage, activationId: String) async throws {
        try await sql.raw(
            """
            UPDATE activations SET failed_attempts = \(bind: lock.failedAttempts), locked_until = \(bind: lock.lockedUntil),
                   permanently_locked = \(bind: lock.isPermanent ? 1 : 0) WHERE id = \(bind: activationId)
            """
        ).run()
    }

    /// A verifier made again with the current cost and pepper, after a right PIN.
    /// Replaces the verifier `checked` (compare and swap): a verifier written meanwhile, by a PIN change, stays.
    func replacePINVerifier(activationId: String, checked: String, with verifier: PINVerifier) async throws {
        try await sql.raw(
            """
            UPDATE activations SET pin_salt = \(bind: Base64URL.encode(verifier.salt)), pin_verifier = \(bind: Base64URL.encode(verifier.value)),
                   pin_iterations = \(bind: verifier.iterations), pin_pepper = \(bind: verifier.pepper.rawValue)
            WHERE id = \(bind: activationId) AND pin_verifier = \(bind: checked)
            """
        ).run()
    }

    /// The peppers stored verifiers were made with, so the manager loads each one they need.
    func pinPepperKindsInUse() async throws -> Set<PINPepperKind> {
        // One index probe per kind: DISTINCT would read the whole index.
        var kinds = Set<PINPepperKind>()
        for kind in PINPepperKind.allCases
        where try await sql.raw("SELECT 1 AS used FROM activations WHERE pin_pepper = \(bind: kind.rawValue) LIMIT 1")
            .first()
            != nil
        {
            kinds.insert(kind)
        }
        return kinds
    }

    /// A right PIN, or an administrator: no failures, no lock, no claim. False when there is no such activation, or
    /// (with `verifier`) when its PIN verifier is no longer that one: a PIN change committed meanwhile.
    @discardableResult
    func clearLockout(activationId: String, verifier: String? = nil) async throws -> Bool {
        let unchanged = verifier.map { SQLQueryString("AND pin_verifier = \(bind: $0)") } ?? SQLQueryString("")
        return try await sql.raw(
            """
            UPDATE activations SET failed_attempts = 0, locked_until = 0, permanently_locked = 0, pin_check_until = 0
            WHERE id = \(bind: activationId) \(unchanged) RETURNING id
            """
        ).first() != nil
    }

    func activationSummaries(email: String?) async throws -> [IdentityManager.ActivationSummary] {
        let filter = email.map { SQLQueryString("WHERE c.email = \(bind: $0.lowercased())") } ?? SQLQueryString("")
        return try await sql.raw(
            """
            SELECT a.id, c.email, a.alias, a.state, a.device_id, d.key_kind, d.name, d.platform, d.factors, d.created_at, d.last_used_at,
                   d.credential_id, d.backup_eligible, d.backed_up, d.ek_issuer, d.unattested_because, a.failed_attempts, a.locked_until,
                   a.permanently_locked
            FROM activations a JOIN accounts c ON c.id = a.account_id LEFT JOIN devices d ON d.id = a.device_id
            \(filter) ORDER BY a.created_at
            """
        ).all().map { row in
            IdentityManager.ActivationSummary(
                id: try row.decode(column: "id", as: String.self),
                email: try row.decode(column: "email", as: String.self),
                alias: try row.decode(column: "alias", as: String.self),
                state: try row.decode(enumColumn: "state", as: ActivationState.self),
                deviceId: try row.decode(column: "device_id", as: String?.self),
                keyKind: try row.decode(column: "key_kind", as: String?.self) == nil
                    ? nil : try row.decode(enumColumn: "key_kind", as: KeyKind.self),
                deviceName: try row.decode(column: "name", as: String?.self),
                platform: try row.decode(column: "platform", as: String?.self),
                factors: try row.decode(column: "factors", as: String?.self).map {
                    Self.orderedFactors(Self.factors($0))
                },
                enrolledAt: try row.decode(column: "created_at", as: Int64?.self),
                lastUsedAt: try row.decode(column: "last_used_at", as: Int64?.self),
                credentialId: try row.decode(column: "credential_id", as: String?.self),
                synced: try row.decode(column: "credential_id", as: String?.self) == nil
                    ? nil
                    : try row.decode(column: "backup_eligible", as: Int64.self) != 0
                        || row.decode(column: "backed_up", as: Int64.self) != 0,
                ekIssuer: try row.decode(column: "ek_issuer", as: String?.self),
                unattestedBecause: try row.decode(column: "unattested_because", as: String?.self),
                failedAttempts: try row.decode(column: "failed_attempts", as: Int.self),
                lockedUntil: try row.decode(column: "locked_until", as: Int64.self),
                permanentlyLocked: try row.decode(column: "permanently_locked", as: Int.self) != 0
            )
        }
    }
}

/// An activation waits for its first personalization, is held by a device, or is revoked for good.
public enum ActivationState: String, Codable, Sendable {
    case pending, personalized, revoked
}
