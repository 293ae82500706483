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
    public var keyKind: String
    /// The host key's name in its key store.
    public var keyReference: String
    public var joinedAt: Int64
}

extension XignSdk {
    /// The host enrolments on this machine, one per manager at most.
    public func hostEnrolments() throws -> [HostEnrolment] { try store.read().hosts ?? [] }

    /// Joins the manager at `url` as a host with `token`: creates the host key where `device_key` says, pins the
    /// manager key named in the token, and stores the enrolment. A join to the same manager replaces the old one.
    public func joinHost(managerURL url: ManagerURL, token: HostJoinToken) throws -> HostEnrolment {
        try store.checkWritable()
        let keyStore = keys.preferred
        let (key, pending): (any DeviceKey, String)
        do { (key, pending) = try keyStore.createPendingKey() } catch {
            throw DeviceKeys.error(error, doing: "cannot create the host key")
        }
        var committed = false
        defer { if !committed { try? keyStore.delete(pending) } }
        let publicKey: String
        do { publicKey = Base64URL.encode(try key.publicKey.derRepresentation) } catch {
            throw XignSdkError(.deviceKeyFailure, "cannot read the new host key: \(error)")
        }
        let nonce = try ManagerClient.nonce()
        let request = HostJoinRequest(joinSecret: token.secret, hostKey: publicKey, keyKind: KeyKind(rawValue: keyStore.kind.rawValue) ?? .software, nonce: nonce)
        let client = ManagerClient(url: url, http: http)
        let compact = try client.postDeviceSigned(APIPath.hosts, body: try JSONEncoder.canonical.encode(request), challenge: token.secret, key: key)
        let managerKey = try ManagerClient.pinnedKey(from: compact, fingerprint: token.managerKeyFingerprint)
        let result = try ManagerClient.verify(compact, type: SignedAnswerType.hostJoin, key: managerKey, as: HostJoinResult.self, nonce: nonce, nonceOf: \.nonce)
        guard result.hostKey == publicKey, (1...64).contains(result.hostId.utf8.count), result.hostId.unicodeScalars.allSatisfy({ $0.isASCII && $0.properties.isAlphabetic || ("0"..."9").contains($0) }),
              (1...253).contains(result.name.utf8.count) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's join answer does not match this request")
        }
        let enrolment = HostEnrolment(
            hostId: result.hostId, name: result.name, managerURL: url, managerKey: Base64URL.encode(managerKey.derRepresentation),
            keyKind: keyStore.kind.rawValue, keyReference: "host-\(result.hostId)", joinedAt: Date().millisecondsSince1970
        )
        do { try keyStore.commit(pending: pending, as: enrolment.keyReference) } catch {
            throw XignSdkError(.deviceKeyFailure, "the manager accepted this host but its key could not be stored (\(error)); free the disk, have the host removed and join again")
        }
        committed = true
        let replaced: [HostEnrolment]
        do {
            replaced = try store.update { contents in
                let gone = (contents.hosts ?? []).filter { $0.managerURL == url }
                contents.hosts = (contents.hosts ?? []).filter { $0.managerURL != url } + [enrolment]
                return gone
            }
        } catch {
            try? keyStore.delete(enrolment.keyReference)
            throw XignSdkError(.stateUnavailable, "the manager accepted this host but the enrolment could not be saved (\(error)); fix that, have the host removed and join again")
        }
        for old in replaced where old.keyReference != enrolment.keyReference { try? keys.store(for: old.keyKind).delete(old.keyReference) }
        return enrolment
    }
}
