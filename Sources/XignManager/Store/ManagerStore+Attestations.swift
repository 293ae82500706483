import SQLKit

/// TPM attestation credentials handed out and not yet answered: at most one per personalization session or join token.
extension ManagerStore {
    struct AttestationChallenge: Sendable {
        var id: String
        /// "session:<id>" or "host:<token hash>": the one request that may answer it.
        var purpose: String
        /// base64url SHA-256 of the secret the credential carries.
        var secretHash: String
        /// The attestation key's TPM2B_PUBLIC, base64url.
        var attestationKey: String
        /// The issuer of the EK certificate, which chained to a trusted CA when the challenge was handed out.
        var ekIssuer: String
        var expiresAt: Int64
    }

    /// Stores `challenge`; one handed out earlier for the same purpose is void (also when two are handed out at once).
    func insertAttestationChallenge(_ challenge: AttestationChallenge) async throws {
        try await sql.raw(
            """
            INSERT INTO attestation_challenges (id, purpose, secret_hash, attestation_key, ek_issuer, expires_at)
            VALUES (\(bind: challenge.id), \(bind: challenge.purpose), \(bind: challenge.secretHash), \(bind: challenge.attestationKey),
                    \(bind: challenge.ekIssuer), \(bind: challenge.expiresAt))
            ON CONFLICT (purpose) DO UPDATE SET id = excluded.id, secret_hash = excluded.secret_hash,
                attestation_key = excluded.attestation_key, ek_issuer = excluded.ek_issuer, expires_at = excluded.expires_at
            """
        ).run()
    }

    /// Uses up the challenge `id` of `purpose`; nil when it is unknown, of another purpose, used or expired.
    func consumeAttestationChallenge(_ id: String, purpose: String, now: Int64) async throws -> AttestationChallenge? {
        guard
            let row = try await sql.raw(
                """
                DELETE FROM attestation_challenges WHERE id = \(bind: id) AND purpose = \(bind: purpose) AND expires_at > \(bind: now)
                RETURNING secret_hash, attestation_key, ek_issuer, expires_at
                """
            ).first()
        else { return nil }
        return AttestationChallenge(
            id: id, purpose: purpose, secretHash: try row.decode(column: "secret_hash", as: String.self),
            attestationKey: try row.decode(column: "attestation_key", as: String.self),
            ekIssuer: try row.decode(column: "ek_issuer", as: String.self),
            expiresAt: try row.decode(column: "expires_at", as: Int64.self))
    }
}
