import FoundationEssentials
import XignProtocol

/// One device of an account as the manager knows it (Nevis's device information).
public typealias DeviceSummary = DeviceSummaryMessage

extension XignSdk {
    /// The devices of the enrolment's account, this machine among them, signed by the manager for our nonce.
    public func accountDevices(idmIdentifier: String) throws -> [DeviceSummary] {
        let entity = try entity(idmIdentifier)
        let managerKey = try entity.pinnedManagerKey()
        let key = try keys.load(entity.keyKind, entity.keyReference, what: "device")
        let client = ManagerClient(url: entity.managerURL, http: http)
        let challenge = try client.challenge(APIPath.challenges, ChallengeRequest(deviceId: entity.idmIdentifier))
        let nonce = try ManagerClient.nonce()
        let body = try JSONEncoder.canonical.encode(AccountDevicesRequest(deviceId: entity.idmIdentifier, challenge: challenge, nonce: nonce))
        let compact = try client.postDeviceSigned(APIPath.accountDevices, body: body, challenge: challenge, key: key)
        let answer = try ManagerClient.verify(
            compact, type: SignedAnswerType.accountDevices, key: managerKey, as: AccountDevicesMessage.self, nonce: nonce, nonceOf: \.nonce)
        guard answer.devices.count <= 256, answer.devices.contains(where: { $0.deviceId == entity.idmIdentifier }) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's device list does not hold this device")
        }
        return answer.devices
    }
}
