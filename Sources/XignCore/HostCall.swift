import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// What a request a host signs needs: the host's enrolment, the manager key it pinned at the join, its key, a client
/// and a fresh challenge to sign over (docs/design.md, invariant 3).
struct HostCall {
    let host: HostEnrolment
    let managerKey: P256PublicKey
    let key: any DeviceKey
    let client: ManagerClient
    let challenge: String

    /// Signs `body` for `path` over the challenge and returns the compact JWS the manager answered.
    func post(_ path: String, _ body: Data) throws -> String {
        try client.postDeviceSigned(path, body: body, challenge: challenge, key: key)
    }
}

extension XignSdk {
    /// A host call to this machine's first host enrolment, through `http` (the SDK's own by default).
    func hostCall(through http: HTTPClient? = nil) throws -> HostCall {
        let host = try hostEnrolment()
        let managerKey = try host.pinnedManagerKey()
        let key = try keys.load(host.keyKind, host.keyReference, what: "host")
        let client = ManagerClient(url: host.managerURL, http: http ?? self.http)
        let challenge = try client.challenge(APIPath.hostChallenges, HostChallengeRequest(hostId: host.hostId))
        return HostCall(host: host, managerKey: managerKey, key: key, client: client, challenge: challenge)
    }
}
