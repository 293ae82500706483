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
        let answer = try deviceSigned(
            entity, key: key, managerKey: managerKey, path: APIPath.accountDevices,
            answer: SignedAnswerType.accountDevices,
            as: AccountDevicesMessage.self, nonceOf: \.nonce
        ) { AccountDevicesRequest(deviceId: entity.idmIdentifier, challenge: $0, nonce: $1) }
        guard answer.devices.contains(where: { $0.deviceId == entity.idmIdentifier }) else {
            throw XignSdkError(.invalidManagerResponse, "the manager's device list does not hold this device")
        }
        return answer.devices
    }
}
