import Foundation
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The api access processes: change PIN, request a new activation, delete the account, add a factor.
///
/// Each starts as an authentication for its purpose, signed with device and PIN, so a wrong PIN
/// charges the lockout like any login. The finish answer carries a single-use grant instead of a login;
/// the device then signs the process's request over that grant at /v1/api-access.
extension IdentityManager {
    /// Finishes a process with its grant. The device signs over the grant, so a grant that leaked is useless alone.
    public func finishApiAccess(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(ApiAccessRequest.self, from: body, "the api access request")
        let proof = try RequestVerifier.DeviceProof(header: signature)
        // The grant and the device's proof over it (a passkey's counter moves here), and the process's field.
        let (grant, process) = try await database.transaction(durability: .unsynced) { store in
            try await self.provenGrant(request, proof: proof, path: APIPath.apiAccess, body: body, in: store)
        }
        guard process != .console else {
            throw ManagerError.badRequest("a console grant opens a session at \(APIPath.consoleSessions)")
        }
        // Before the grant is spent, so a new PIN against the policy can be corrected and sent again.
        let newPIN = try accountChanges.checkFields(request, for: process)
        // The slow PIN hash runs outside every transaction, and only for a signed, valid request.
        let verifier = try (process == .changePin ? newPIN : nil).map { try pinChecker.makeVerifier(pin: $0) }
        let fresh = try (process == .requestNewActivation ? newPIN : nil).map {
            try activations.makeActivation(pin: $0)
        }
        // The grant is spent in the transaction that does the work: both happen, or neither.
        let (result, mailId) = try await database.transaction { store -> (ApiAccessResultMessage, String?) in
            guard try await store.redeemAuthorizationCode(request.grant, now: Self.now()) != nil else {
                throw ManagerError(.conflict, .challengeInvalid, "the grant was already used")
            }
            let (device, activation) = try await AccountChanges.account(of: grant, in: store)
            var result = ApiAccessResultMessage(nonce: request.nonce, process: process, deviceId: device.id)
            var mailId: String?
            switch process {
            case .changePin:
                result.activationsWithNewPin = try await self.accountChanges.changePIN(
                    verifier!, of: activation, by: device, in: store)
                // The new PIN's generation, so the device makes its offline verifier for it.
                result.offline = try await store.activation(id: activation.id).map {
                    self.offline.policy(for: device, of: $0)
                }
            case .requestNewActivation:
                (result.newActivation, mailId) = try await self.accountChanges.addActivation(
                    fresh!, request.newActivation!, to: activation, by: device, in: store)
            case .delete:
                result.revokedDevices = try await self.accountChanges.deleteAccount(
                    of: activation, by: device, in: store)
            case .addFactor:
                result.factors = try await self.accountChanges.addFactor(
                    request.factor!, boundTo: request.biometricEnrolment, to: device, of: activation, in: store)
            case .revokeDevice:
                (result.revokedDevices, mailId) = try await self.accountChanges.revokeDevice(
                    request.revokedDeviceId!, of: activation, by: device, in: store)
            case .console: preconditionFailure("refused above")
            }
            return (result, mailId)
        }
        if let mailId { await mail.deliver(id: mailId) }
        logger.info("api access finished", metadata: ["device": "\(grant.deviceId)", "process": "\(process.rawValue)"])
        return try signer.sign(result, type: SignedAnswerType.apiAccess)
    }

    /// An api access grant that is live, and its device's proof over it at `path`.
    func provenGrant(
        _ request: ApiAccessRequest, proof: RequestVerifier.DeviceProof, path: String, body: Data,
        in store: ManagerStore
    ) async throws -> (ManagerStore.CodeGrant, ApiAccessProcess) {
        guard let grant = try await store.authorizationCode(request.grant, now: Self.now()),
            case .apiAccess(let process) = grant.purpose
        else {
            throw ManagerError(
                .conflict, .sessionInvalid, "the grant is unknown, expired or was used; start the process again")
        }
        let device = try await DeviceEligibility.enrolledDevice(grant.deviceId, in: store)
        try await verifier.checkDeviceProof(
            proof, of: device, path: path, body: body, challenge: request.grant, in: store)
        return (grant, process)
    }

    /// Device information: the devices of the caller's account, signed by the caller over a challenge.
    public func accountDevices(body: Data, signature: String?) async throws -> String {
        let request = try RequestBody.decode(AccountDevicesRequest.self, from: body, "the device list request")
        let devices = try await database.transaction { store in
            let device = try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.accountDevices, body: body,
                signature: signature, in: store)
            guard let accountId = try await store.accountId(activationId: device.activationId) else {
                throw ManagerError(.notFound, .deviceNotFound, "this device's activation is gone; personalize again")
            }
            return try await store.devices(ofAccount: accountId)
        }
        return try signer.sign(
            AccountDevicesMessage(nonce: request.nonce, devices: devices), type: SignedAnswerType.accountDevices)
    }
}
