import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

extension XignSdk {
    /// The accounts that may log in to this host, with the numbers and local groups the manager gave them: signed with
    /// the pinned manager key for this host and a fresh nonce, so neither a man in the middle nor a replay of an older
    /// directory (an account since removed) is believed. With `query`, only the account with that name or number.
    public func fetchHostDirectory(_ query: DirectoryQuery? = nil) throws -> HostDirectory {
        let host = try hostEnrolment()
        let managerKey = try host.pinnedManagerKey()
        let key = try keys.load(host.keyKind, host.keyReference, what: "host")
        var large = http
        large.configuration.maximumResponseBytes = WireLimit.directoryBytes
        let client = ManagerClient(url: host.managerURL, http: large)
        let challenge = try client.challenge(APIPath.hostChallenges, HostChallengeRequest(hostId: host.hostId))
        let nonce = try ManagerClient.nonce()
        let compact = try client.postDeviceSigned(
            APIPath.hostDirectory,
            body: try JSONEncoder.canonical.encode(
                HostDirectoryRequest(
                    hostId: host.hostId, challenge: challenge, nonce: nonce, loginName: query?.loginName,
                    uid: query?.number.map(Int64.init))),
            challenge: challenge, key: key)
        let directory = try ManagerClient.verify(
            compact, type: SignedAnswerType.hostDirectory, key: managerKey, as: HostDirectory.self, nonce: nonce,
            nonceOf: \.nonce)
        guard directory.hostId == host.hostId else {
            throw XignSdkError(.managerSignatureInvalid, "the manager's directory is for another host")
        }
        return directory
    }
}

extension HostEnrolment {
    /// The manager key pinned at the join.
    func pinnedManagerKey() throws -> P256PublicKey {
        guard let der = Base64URL.decode(managerKey), let key = try? P256PublicKey(derRepresentation: der) else {
            throw XignSdkError(.stateUnavailable, "the pinned manager key of host \(name) is damaged; join again")
        }
        return key
    }
}
