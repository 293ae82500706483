import Foundation
import XignCrypto
import XignProtocol

/// The account page's session: one passkey prompt opens it, and for a few minutes it only reads (the logins that wait,
/// long-polled, and the devices). Every change still takes the passkey and the PIN. The token lives in an HttpOnly,
/// Secure, SameSite=Strict cookie, and the manager keeps only its hash.
extension IdentityManager {
    static let webSessionMilliseconds: Int64 = 600_000

    /// Opens a session for the signing device; the token and when it runs out.
    public func openWebSession(body: Data, signature: String?) async throws -> (token: String, expiresAt: Int64) {
        let request = try RequestBody.decode(WebSessionRequest.self, from: body, "the session request")
        let token = try SecureRandom.token()
        let expiresAt = Self.now() + Self.webSessionMilliseconds
        try await database.transaction { store in
            try await self.verifier.verifyDeviceSignature(
                deviceId: request.deviceId, challenge: request.challenge, path: APIPath.webSessions, body: body,
                signature: signature, in: store)
            _ = try await DeviceEligibility.enrolledDevice(request.deviceId, in: store)
            try await store.insertWebSession(
                .account, tokenHash: Self.hashed(token), deviceId: request.deviceId, expiresAt: expiresAt)
        }
        return (token, expiresAt)
    }

    public func endWebSession(token: String?) async throws {
        guard let token, token.utf8.count <= WireLimit.identifier else { return }
        try await database.transaction { store in
            try await store.deleteWebSession(.account, tokenHash: Self.hashed(token))
        }
    }

    /// The logins that wait for the session's account; held until they differ from `seen` or the wait runs out.
    public func pendingConfirmations(
        _ request: WebPendingRequest, session token: String?
    ) async throws -> WebPendingMessage {
        let accountId = try await database.read { store in
            guard let accountId = try await store.accountId(ofDevice: try await self.webSessionDevice(token, in: store))
            else {
                throw ManagerError.internalFailure("device without account")
            }
            return accountId
        }
        let seen = Set(request.seen)
        let pending = try await wakeUps.waitForPendingConfirmations(of: accountId, upTo: request.waitMilliseconds) {
            Set($0.map(\.id)) != seen
        }
        return WebPendingMessage(confirmations: pending.map(\.pendingMessage))
    }

    /// The session's account's devices.
    public func devices(session token: String?) async throws -> WebDevicesMessage {
        try await database.read { store in
            let deviceId = try await self.webSessionDevice(token, in: store)
            guard let accountId = try await store.accountId(ofDevice: deviceId) else {
                throw ManagerError.internalFailure("device without account")
            }
            return WebDevicesMessage(deviceId: deviceId, devices: try await store.devices(ofAccount: accountId))
        }
    }

    private func webSessionDevice(_ token: String?, in store: ManagerStore) async throws -> String {
        guard let token, token.utf8.count <= WireLimit.identifier,
            let deviceId = try await store.webSessionDevice(.account, tokenHash: Self.hashed(token), now: Self.now())
        else {
            throw ManagerError(
                .unauthorized, .sessionInvalid,
                "the page's session ran out or its device was removed; sign in with your passkey again")
        }
        return deviceId
    }
}
