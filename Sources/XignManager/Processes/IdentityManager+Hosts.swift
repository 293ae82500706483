import Foundation
import XignCrypto
import XignProtocol

/// Hosts: servers that hold no key of their users. An administrator names one and gets a one-time join token;
/// the host joins with a key of its own, signed, and pins the manager's key from the token.
extension IdentityManager {
    public struct HostSummary: Codable, Sendable {
        public var id: String
        public var name: String
        public var groups: [String]
        /// software, tpm (claimed by the host) or attested.
        public var keyKind: String
        public var ekIssuer: String?
        public var keyFingerprint: String
        public var joinedAt: Int64
    }

    /// How long a join token lasts unless the administrator says otherwise.
    public static let hostJoinTokenLifetime: Duration = .seconds(3600)

    /// A host joins: the token is used up, and the key that signed the request becomes the host's.
    public func joinHost(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(HostJoinRequest.self, from: body, "the join request")
        guard let keyBytes = Base64URL.decode(request.hostKey),
            let hostKey = try? P256PublicKey(derRepresentation: keyBytes)
        else {
            throw ManagerError.badRequest("hostKey is not a base64url P-256 SubjectPublicKeyInfo")
        }
        try RequestVerifier.checkSignature(
            try RequestVerifier.signature(from: signature), by: hostKey, of: .host, path: APIPath.hosts, body: body,
            challenge: request.joinSecret)
        guard request.keyKind != .passkey else {
            throw ManagerError.badRequest("a host's key is a TPM or software key, never a passkey")
        }
        if configuration.requireHardwareKey >= .claimed && request.keyKind == .software {
            throw ManagerError(
                .forbidden, .securityInsufficient,
                "this manager accepts only hardware-bound (TPM) host keys; join again with device_key = tpm")
        }
        let hostId = try SecureRandom.identifier()
        let requirement = configuration.requireHardwareKey
        let tokenHash = Self.hashed(request.joinSecret)
        let (name, kind, finding) = try await database.transaction {
            store -> (String, String, DeviceEligibility.KeyFinding?) in
            guard let name = try await store.consumeHostJoinToken(hash: tokenHash, now: Self.now()) else {
                throw ManagerError(
                    .conflict, .sessionInvalid,
                    "the join token is unknown, used or expired; ask the administrator for a new one")
            }
            guard try await !store.isHostNameTaken(name) else {
                throw ManagerError(.conflict, .conflict, "a host named \(name) joined meanwhile")
            }
            let finding = try await self.attestations.finding(
                request.attestation, of: hostKey, kind: request.keyKind, purpose: "host:\(tokenHash)", in: store)
            if requirement == .attested,
                let refusal = DeviceEligibility.refusal(
                    of: requirement, kind: request.keyKind, finding: finding, what: "host")
            {
                throw DeviceEligibility.securityInsufficient(
                    refusal, who: "this manager", then: "have the host removed and join again with an attested TPM key")
            }
            try await store.insertHost(
                id: hostId, name: name, publicKey: request.hostKey, keyKind: request.keyKind,
                ekIssuer: finding?.ekIssuer,
                unattestedBecause: finding?.unattestedBecause, createdAt: Self.now())
            let kind = DeviceEligibility.keyDescription(request.keyKind, finding: finding)
            try await store.recordAudit(AuditEvent(.hostJoined, host: name, detail: kind, actor: "host \(hostId)"))
            return (name, kind, finding)
        }
        logger.notice("host joined", metadata: ["host": "\(name)", "id": "\(hostId)", "keyKind": "\(kind)"])
        return try signer.sign(
            HostJoinResult(
                nonce: request.nonce, hostId: hostId, name: name, hostKey: request.hostKey,
                attestedBy: finding?.ekIssuer,
                notAttestedBecause: finding?.unattestedBecause),
            type: SignedAnswerType.hostJoin,
            includeKey: true)
    }

    /// The host that signed a request to `path` over its challenge, which is spent here, in the caller's transaction
    /// (docs/design.md, invariant 3).
    func signingHost(
        id: String, signature raw: Data, path: String, body: Data, challenge: String, in store: ManagerStore
    ) async throws -> ManagerStore.HostRecord {
        guard let host = try await store.host(id: id) else { throw Self.unknownHost }
        try RequestVerifier.checkSignature(
            raw, by: host.publicKey, of: .host, path: path, body: body, challenge: challenge)
        guard try await store.consumeHostChallenge(challenge, hostId: host.id, now: Self.now()) else {
            throw ManagerError(
                .conflict, .challengeInvalid, "the challenge is unknown, expired or was already used; request a new one"
            )
        }
        return host
    }

    /// The host group that stands for every host.
    public static let everyHost = "*"

}
