import SQLKit
import XignCrypto
import XignProtocol

/// Devices, their keys, and the single-use challenges of device-signed requests.
extension ManagerStore {
    struct NewDevice: Sendable {
        var id: String
        var activationId: String
        /// base64url SubjectPublicKeyInfo.
        var publicKey: String
        var keyKind: KeyKind
        var name: String
        var platform: String
        var createdAt: Int64
        var passkey: Passkey? = nil
        /// The issuer of the EK certificate the key was attested with, or nil.
        var ekIssuer: String? = nil
        /// Why the key is not attested.
        var unattestedBecause: String? = nil
    }

    /// What a passkey device has beyond its key: the credential, and the counter its assertions must grow.
    struct Passkey: Sendable {
        /// base64url, as browsers name it.
        var credentialId: String
        /// The authenticator's model, in hex (all zero when it does not say).
        var aaguid: String
        var signCount: UInt32
        var backupEligible: Bool
        var backedUp: Bool

        /// Copied, or allowed to be copied, to the user's other devices: either flag makes a passkey synced, since
        /// one eligible today may be backed up tomorrow (WebAuthn L3 §6.1.3).
        var isSynced: Bool { backupEligible || backedUp }
    }

    struct DeviceRecord: Sendable {
        var id: String
        var activationId: String
        var publicKey: P256PublicKey
        var keyKind: KeyKind
        /// Every factor the device can sign with: device and PIN, and those it added.
        var factors: Set<AuthenticatorType>
        /// The credential id and counter of a passkey device.
        var passkey: Passkey?
        /// The last offline event recorded from this device.
        var offlineReportedThrough: Int64 = 0
        var ekIssuer: String? = nil
        var unattestedBecause: String? = nil
        /// The digest of the enrolled fingers the biometric factor is bound to.
        var biometricEnrolment: String? = nil
    }

    /// The factors column holds the added ones, comma-separated; unknown names (a newer manager's) are skipped.
    static func factors(_ column: String) -> Set<AuthenticatorType> {
        Set(column.split(separator: ",").compactMap { AuthenticatorType(rawValue: String($0)) }).union([.device, .pin])
    }

    /// `factors` in the wire's order (AuthenticatorType's).
    static func orderedFactors(_ factors: Set<AuthenticatorType>) -> [AuthenticatorType] {
        AuthenticatorType.allCases.filter(factors.contains)
    }

    func insertDevice(_ device: NewDevice) async throws {
        try await sql.raw(
            """
            INSERT INTO devices (id, activation_id, public_key, key_kind, name, platform, revoked, created_at,
                                 credential_id, aaguid, sign_count, backup_eligible, backed_up, ek_issuer, unattested_because)
            VALUES (\(bind: device.id), \(bind: device.activationId), \(bind: device.publicKey), \(bind: device.keyKind.rawValue),
                    \(bind: device.name), \(bind: device.platform), 0, \(bind: device.createdAt),
                    \(bind: device.passkey?.credentialId), \(bind: device.passkey?.aaguid), \(bind: Int64(device.passkey?.signCount ?? 0)),
                    \(bind: device.passkey?.backupEligible == true ? 1 : 0), \(bind: device.passkey?.backedUp == true ? 1 : 0),
                    \(bind: device.ekIssuer), \(bind: device.unattestedBecause))
            """
        ).run()
    }

    /// A device that is not revoked; with `holdingItsActivation`, only while its activation is personalized to it.
    func device(_ id: String, holdingItsActivation: Bool = false) async throws -> DeviceRecord? {
        let holding =
            holdingItsActivation
            ? SQLQueryString("AND a.state = 'personalized' AND a.device_id = d.id") : SQLQueryString("")
        guard
            let row = try await sql.raw(
                """
                SELECT d.id, d.activation_id, d.public_key, d.key_kind, d.factors, d.credential_id, d.aaguid, d.sign_count,
                       d.backup_eligible, d.backed_up, d.offline_reported_through, d.ek_issuer, d.unattested_because, d.biometric_enrolment
                FROM devices d JOIN activations a ON a.id = d.activation_id
                WHERE d.id = \(bind: id) AND d.revoked = 0 \(holding)
                """
            ).first()
        else { return nil }
        guard let key = StoredPublicKeys.shared.key(try row.decode(column: "public_key", as: String.self)) else {
            throw ManagerError.internalFailure("stored key of device \(id) is corrupt")
        }
        return DeviceRecord(
            id: id, activationId: try row.decode(column: "activation_id", as: String.self), publicKey: key,
            keyKind: try row.decode(enumColumn: "key_kind", as: KeyKind.self),
            factors: Self.factors(try row.decode(column: "factors", as: String.self)),
            passkey: try Self.passkey(in: row),
            offlineReportedThrough: try row.decode(column: "offline_reported_through", as: Int64.self),
            ekIssuer: try row.decode(column: "ek_issuer", as: String?.self),
            unattestedBecause: try row.decode(column: "unattested_because", as: String?.self),
            biometricEnrolment: try row.decode(column: "biometric_enrolment", as: String?.self)
        )
    }

    /// Records that the device's offline events up to `sequence` are in; false when another request recorded them first.
    func advanceOfflineReport(ofDevice id: String, from old: Int64, to sequence: Int64) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE devices SET offline_reported_through = \(bind: sequence)
            WHERE id = \(bind: id) AND offline_reported_through = \(bind: old) RETURNING id
            """
        ).first() != nil
    }

    private static func passkey(in row: some SQLRow) throws -> Passkey? {
        guard let credentialId = try row.decode(column: "credential_id", as: String?.self) else { return nil }
        guard let count = UInt32(exactly: try row.decode(column: "sign_count", as: Int64.self)) else {
            throw ManagerError.internalFailure(
                "the stored signature counter of passkey \(credentialId.prefix(16)) is out of range")
        }
        return Passkey(
            credentialId: credentialId, aaguid: try row.decode(column: "aaguid", as: String?.self) ?? "",
            signCount: count,
            backupEligible: try row.decode(column: "backup_eligible", as: Int64.self) != 0,
            backedUp: try row.decode(column: "backed_up", as: Int64.self) != 0)
    }

    /// Moves a passkey's counter from `old` to `new`; false when another request moved it first (a replay racing the
    /// original), so exactly one of two requests with one assertion wins.
    func advanceSignCount(ofDevice id: String, from old: UInt32, to new: UInt32, backedUp: Bool) async throws -> Bool {
        try await sql.raw(
            """
            UPDATE devices SET sign_count = \(bind: Int64(new)), backed_up = \(bind: backedUp ? 1 : 0)
            WHERE id = \(bind: id) AND sign_count = \(bind: Int64(old)) RETURNING id
            """
        ).first() != nil
    }

    /// The device a passkey credential belongs to, revoked or not, so a credential enrols only once.
    func deviceId(ofCredential credentialId: String) async throws -> String? {
        try await sql.raw("SELECT id FROM devices WHERE credential_id = \(bind: credentialId)").first()?.decode(
            column: "id", as: String.self)
    }

    func recordUse(ofDevice id: String, at time: Int64) async throws {
        try await sql.raw("UPDATE devices SET last_used_at = \(bind: time) WHERE id = \(bind: id)").run()
    }

    /// Sets the device's factors and the finger enrolment its biometric factor is bound to.
    func setFactors(_ factors: Set<AuthenticatorType>, biometricEnrolment: String?, ofDevice id: String) async throws {
        let added = factors.subtracting([.device, .pin]).map(\.rawValue).sorted().joined(separator: ",")
        try await sql.raw(
            "UPDATE devices SET factors = \(bind: added), biometric_enrolment = \(bind: biometricEnrolment) WHERE id = \(bind: id)"
        ).run()
    }

    /// The devices that hold an activation of the account, oldest first.
    func devices(ofAccount accountId: String) async throws -> [DeviceSummaryMessage] {
        try await sql.raw(
            """
            SELECT d.id, a.alias, d.name, d.platform, d.key_kind, d.factors, d.created_at, d.last_used_at, d.ek_issuer
            FROM devices d JOIN activations a ON a.id = d.activation_id AND a.device_id = d.id AND a.state = 'personalized'
            WHERE a.account_id = \(bind: accountId) AND d.revoked = 0 ORDER BY d.created_at, d.id
            """
        ).all().map { row in
            DeviceSummaryMessage(
                deviceId: try row.decode(column: "id", as: String.self),
                activationAlias: try row.decode(column: "alias", as: String.self),
                name: try row.decode(column: "name", as: String.self),
                platform: try row.decode(column: "platform", as: String.self),
                keyKind: try row.decode(enumColumn: "key_kind", as: KeyKind.self),
                factors: Self.orderedFactors(Self.factors(try row.decode(column: "factors", as: String.self))),
                enrolledAt: try row.decode(column: "created_at", as: Int64.self),
                lastUsedAt: try row.decode(column: "last_used_at", as: Int64?.self),
                attestedBy: try row.decode(column: "ek_issuer", as: String?.self)
            )
        }
    }

    func revokeDevice(_ id: String) async throws {
        try await sql.raw("UPDATE devices SET revoked = 1 WHERE id = \(bind: id)").run()
    }

    /// The address of the permanent account, other than `accountId`'s, that `deviceId` is enrolled for.
    func otherAccountEmail(ofDevice deviceId: String, notAccount accountId: String) async throws -> String? {
        try await sql.raw(
            """
            SELECT c.email FROM devices d JOIN activations a ON a.id = d.activation_id JOIN accounts c ON c.id = a.account_id
            WHERE d.id = \(bind: deviceId) AND d.revoked = 0 AND c.is_temporary = 0 AND c.id <> \(bind: accountId)
            """
        ).first()?.decode(column: "email", as: String.self)
    }

    /// Keeps `challenge` for `deviceId` in one statement, if that device is enrolled (false when not); the expiry
    /// service deletes it once it ran out.
    func insertDeviceChallenge(_ challenge: ChallengeMessage, deviceId: String) async throws -> Bool {
        try await sql.raw(
            """
            INSERT INTO device_challenges (challenge, device_id, expires_at)
            SELECT \(bind: challenge.challenge), d.id, \(bind: challenge.expiresAt)
            FROM devices d JOIN activations a ON a.id = d.activation_id WHERE d.id = \(bind: deviceId) AND d.revoked = 0
            RETURNING device_id
            """
        ).first() != nil
    }

    /// Uses up a device's challenge; false when it is unknown, expired or used.
    func consumeDeviceChallenge(_ challenge: String, deviceId: String, now: Int64) async throws -> Bool {
        try await sql.raw(
            """
            DELETE FROM device_challenges WHERE challenge = \(bind: challenge) AND device_id = \(bind: deviceId) AND expires_at > \(bind: now)
            RETURNING device_id
            """
        ).first() != nil
    }
}
