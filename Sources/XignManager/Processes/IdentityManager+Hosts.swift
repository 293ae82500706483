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

    /// A join token for a new host `name`; an earlier token for that name is void. Refused while a host has the name.
    public func addHost(
        name: String, groups: [String] = [], validFor lifetime: Duration = hostJoinTokenLifetime
    ) async throws -> HostJoinToken {
        guard HostNameValidator.isValid(name) else {
            throw ManagerError.badRequest(
                "'\(name.prefix(64))' is not a host name: use 1 to 253 letters, digits, dots and dashes")
        }
        try Self.checkGroupNames(groups)
        let token = HostJoinToken(
            secret: try SecureRandom.token(byteCount: 16), managerKeyFingerprint: signer.publicKey.fingerprint)
        let expiresAt = Self.now() + lifetime.components.seconds * 1000
        try await database.transaction { store in
            guard try await !store.isHostNameTaken(name) else {
                throw ManagerError(
                    .conflict, .conflict,
                    "a host named \(name) has joined already; `xign-manager admin hosts remove \(name)` first")
            }
            try await store.insertHostJoinToken(hash: Self.hashed(token.secret), name: name, expiresAt: expiresAt)
            try await store.setGroups(groups, hostName: name)
            try await store.recordAudit(
                self.adminEvent(
                    .hostAdded, host: name, detail: groups.isEmpty ? nil : "groups \(groups.joined(separator: ","))"))
        }
        logger.notice("host join token issued", metadata: ["host": "\(name)"])
        return token
    }

    public func hosts() async throws -> [HostSummary] {
        try await database.transaction { store in
            var summaries: [HostSummary] = []
            for host in try await store.hosts() {
                summaries.append(
                    HostSummary(
                        id: host.id, name: host.name, groups: try await store.groups(hostName: host.name),
                        keyKind: host.ekIssuer == nil ? host.keyKind.rawValue : "attested", ekIssuer: host.ekIssuer,
                        keyFingerprint: host.publicKey.fingerprint, joinedAt: host.createdAt))
            }
            return summaries
        }
    }

    /// Removes a host, or the join token waiting for it.
    public func removeHost(name: String) async throws {
        try await database.transaction { store in
            guard try await store.removeHost(name: name) else {
                throw ManagerError(
                    .notFound, .notFound, "no host named \(name.prefix(64)); `xign-manager admin hosts list` shows them"
                )
            }
            try await store.recordAudit(self.adminEvent(.hostRemoved, host: name))
        }
        logger.notice("host removed", metadata: ["host": "\(name)"])
    }

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
            let finding = try await self.finding(
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

    /// The host group that stands for every host.
    public static let everyHost = "*"

    /// Lets the account with `email` log in to hosts in one of `groups` (`everyHost`: all of them; none: no host).
    public func setHostGroups(_ groups: [String], email: String) async throws {
        try Self.checkGroupNames(groups.filter { $0 != Self.everyHost })
        try await database.transaction { store in
            guard let accountId = try await store.accountId(email: email.lowercased()) else {
                throw ManagerError(
                    .notFound, .notFound, "no account \(email.prefix(254)); `xign-manager admin accounts` lists them")
            }
            try await store.setHostGroups(groups, accountId: accountId)
            try await store.recordAudit(
                self.adminEvent(
                    .hostGroupsSet, email: email.lowercased(),
                    detail: groups.isEmpty ? "no host" : groups.joined(separator: ",")))
        }
        logger.notice("host groups set", metadata: ["email": "\(email)", "groups": "\(groups.joined(separator: ","))"])
    }

    /// The upgrade step for host access: every account with a login name and no host groups, which could log in to any
    /// host before access was explicit, keeps that (`*`). Returns their addresses.
    public func keepOpenHostAccess() async throws -> [String] {
        try await database.transaction { store in
            let accounts = try await store.accountsWithoutHostGroups()
            for account in accounts {
                try await store.setHostGroups([Self.everyHost], accountId: account.id)
                try await store.recordAudit(
                    self.adminEvent(.hostGroupsSet, email: account.email, detail: "every host (kept at the upgrade)"))
            }
            return accounts.map(\.email)
        }
    }

    private static func checkGroupNames(_ groups: [String]) throws {
        for group in groups where !HostNameValidator.isValid(group) || group.utf8.count > WireLimit.identifier {
            throw ManagerError.badRequest(
                "'\(group.prefix(64))' is not a group name: use 1 to 64 letters, digits, dots and dashes")
        }
    }
}

/// Host names as an administrator writes them: DNS-like, so they read well in a prompt and a log line.
enum HostNameValidator {
    static func isValid(_ name: String) -> Bool {
        (1...WireLimit.hostName).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "-"):
                    return true
                default:
                    return false
                }
            } && !name.hasPrefix("-") && !name.hasPrefix(".")
    }
}
