import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// This machine as a host of a manager: a server that asks the manager to have its users confirm logins.
public struct HostEnrolment: Codable, Sendable, Equatable {
    public var hostId: String
    /// The name the administrator gave this host.
    public var name: String
    public var managerURL: ManagerURL
    /// The manager's signing key (SPKI, base64url), pinned at the join.
    public var managerKey: String
    public var keyKind: KeyKind
    /// The host key's name in its key store.
    public var keyReference: String
    public var joinedAt: Int64
    /// For a TPM key, what the manager found it to be at the join ("attested by …" or "not attested: …").
    public var keyAttestation: String?
}

extension XignSdk {
    /// The host enrolments on this machine, one per manager at most.
    public func hostEnrolments() throws -> [HostEnrolment] { try store.read().hosts ?? [] }

    /// Joins the manager at `url` as a host with `token`: creates the host key where `device_key` says, pins the
    /// manager key named in the token, and stores the enrolment. A join to the same manager replaces the old one.
    public func joinHost(managerURL url: ManagerURL, token: HostJoinToken) throws -> HostEnrolment {
        try store.checkWritable()
        return try keys.register(
            "host", retry: "have the host removed and join again",
            { key, publicKey, kind, reference in
                let nonce = try ManagerClient.nonce()
                let client = ManagerClient(url: url, http: http)
                let attestation = try KeyAttestor(tpm: keys.tpm, client: client).evidence(
                    for: key, purpose: .hostJoin(joinSecret: token.secret))
                let request = HostJoinRequest(
                    joinSecret: token.secret, hostKey: publicKey, keyKind: kind, nonce: nonce, attestation: attestation)
                let compact = try client.postDeviceSigned(
                    APIPath.hosts, body: try JSONEncoder.canonical.encode(request), challenge: token.secret, key: key)
                let managerKey = try ManagerClient.pinnedKey(from: compact, fingerprint: token.managerKeyFingerprint)
                let result = try ManagerClient.verify(
                    compact, type: SignedAnswerType.hostJoin, key: managerKey, as: HostJoinResult.self, nonce: nonce,
                    nonceOf: \.nonce)
                guard result.hostKey == publicKey else {
                    throw XignSdkError(.invalidManagerResponse, "the manager's join answer does not match this request")
                }
                return HostEnrolment(
                    hostId: result.hostId, name: result.name, managerURL: url,
                    managerKey: Base64URL.encode(managerKey.derRepresentation),
                    keyKind: kind, keyReference: reference, joinedAt: Date().millisecondsSince1970,
                    keyAttestation: KeyAttestor.summary(
                        attestedBy: result.attestedBy, notAttestedBecause: result.notAttestedBecause)
                )
            },
            save: { enrolment in
                try store.update { contents in
                    let gone = (contents.hosts ?? []).filter { $0.managerURL == url }
                    contents.hosts = (contents.hosts ?? []).filter { $0.managerURL != url } + [enrolment]
                    return gone.map { (kind: $0.keyKind, reference: $0.keyReference) }
                }
            })
    }
}
