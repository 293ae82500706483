import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

extension XignSdk {
    /// The accounts that may log in to this host, with the numbers and local groups the manager gave them: signed with
    /// the pinned manager key for this host and a fresh nonce, so neither a man in the middle nor a replay of an older
    /// directory (an account since removed) is believed. With `query`, only the account with that name or number.
    public func fetchHostDirectory(_ query: DirectoryQuery? = nil) throws -> HostDirectory {
        var large = http
        large.configuration.maximumResponseBytes = WireLimit.directoryBytes
        let call = try hostCall(through: large)
        let nonce = try ManagerClient.nonce()
        let compact = try call.post(
            APIPath.hostDirectory,
            try JSONEncoder.canonical.encode(
                HostDirectoryRequest(
                    hostId: call.host.hostId, challenge: call.challenge, nonce: nonce, loginName: query?.loginName,
                    uid: query?.number.map(Int64.init))))
        let directory = try ManagerClient.verify(
            compact, type: SignedAnswerType.hostDirectory, key: call.managerKey, as: HostDirectory.self, nonce: nonce,
            nonceOf: \.nonce)
        guard directory.hostId == call.host.hostId else {
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
