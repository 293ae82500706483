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
    }

    struct DeviceRecord: Sendable {
        var id: String
        var activationId: String
        var publicKey: P256PublicKey
        var keyKind: KeyKind
        /// Every factor the device can sign with: device and PIN, and those it added.
        var factors: Set<AuthenticatorType>
    }

    /// The factors column holds the added ones, comma-separated; unknown names (a newer manager's) are skipped.
    static func factors(_ column: String) -> Set<AuthenticatorType> {
        Set(column.split(separator: ",").compactMap { AuthenticatorType(rawValue: String($0)) }).union([.device, .pin])
    }

    /// `factors` in the wire's order (AuthenticatorType's).
    static func orderedFactors(_ factors: Set<AuthenticatorType>) -> [AuthenticatorType] { AuthenticatorType.allCases.filter(factors.contains) }

    func insertDevice(_ device: NewDevice) async throws {
        try await sql.raw(
            """
            INSERT INTO devices (id, activation_id, public_key, key_kind, name, platform, revoked, created_at)
            VALUES (\(bind: device.id), \(bind: device.activationId), \(bind: device.publicKey), \(bind: device.keyKind.rawValue),
                    \(bind: device.name), \(bind: device.platform), 0, \(bind: device.createdAt))
            """
        ).run()
    }

    /// A device that is not revoked; with `holdingItsActivation`, only while its activation is personalized to it.
    func device(_ id: String, holdingItsActivation: Bool = false) async throws -> DeviceRecord? {
        let holding = holdingItsActivation ? SQLQueryString("AND a.state = 'personalized' AND a.device_id = d.id") : SQLQueryString("")
        guard
            let row = try await sql.raw(
                """
                SELECT d.id, d.activation_id, d.public_key, d.key_kind, d.factors FROM devices d JOIN activations a ON a.id = d.activation_id
                WHERE d.id = \(bind: id) AND d.revoked = 0 \(holding)
                """
            ).first()
        else { return nil }
        guard let keyBytes = Base64URL.decode(try row.decode(column: "public_key", as: String.self)),
            let key = try? P256PublicKey(derRepresentation: keyBytes)
        else {
            throw ManagerError.internalFailure("stored key of device \(id) is corrupt")
        }
        return DeviceRecord(
            id: id, activationId: try row.decode(column: "activation_id", as: String.self), publicKey: key,
            keyKind: try row.decode(enumColumn: "key_kind", as: KeyKind.self),
            factors: Self.factors(try row.decode(column: "factors", as: String.self))
        )
    }

    func recordUse(ofDevice id: String, at time: Int64) async throws {
        try await sql.raw("UPDATE devices SET last_used_at = \(bind: time) WHERE id = \(bind: id)").run()
    }

    func setFactors(_ factors: Set<AuthenticatorType>, ofDevice id: String) async throws {
        let added = factors.subtracting([.device, .pin]).map(\.rawValue).sorted().joined(separator: ",")
        try await sql.raw("UPDATE devices SET factors = \(bind: added) WHERE id = \(bind: id)").run()
    }

    /// The devices that hold an activation of the account, oldest first.
    func devices(ofAccount accountId: String) async throws -> [DeviceSummaryMessage] {
        try await sql.raw(
            """
            SELECT d.id, a.alias, d.name, d.platform, d.key_kind, d.factors, d.created_at, d.last_used_at
            FROM devices d JOIN activations a ON a.id = d.activation_id AND a.device_id = d.id AND a.state = 'personalized'
            WHERE a.account_id = \(bind: accountId) AND d.revoked = 0 ORDER BY d.created_at, d.id
            """
        ).all().map { row in
            DeviceSummaryMessage(
                deviceId: try row.decode(column: "id", as: String.self), activationAlias: try row.decode(column: "alias", as: String.self),
                name: try row.decode(column: "name", as: String.self), platform: try row.decode(column: "platform", as: String.self),
                keyKind: try row.decode(enumColumn: "key_kind", as: KeyKind.self),
                factors: Self.orderedFactors(Self.factors(try row.decode(column: "factors", as: String.self))),
                enrolledAt: try row.decode(column: "created_at", as: Int64.self), lastUsedAt: try row.decode(column: "last_used_at", as: Int64?.self)
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

    /// Stores a challenge for `deviceId`; the expiry service deletes it once it ran out.
    func insertDeviceChallenge(_ challenge: ChallengeMessage, deviceId: String) async throws {
        try await sql.raw(
            """
            INSERT INTO device_challenges (challenge, device_id, expires_at)
            VALUES (\(bind: challenge.challenge), \(bind: deviceId), \(bind: challenge.expiresAt))
            """
        ).run()
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
