import FoundationEssentials

public struct ChallengeRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public init(deviceId: String) { self.deviceId = deviceId }
}

public struct ChallengeMessage: Codable, Equatable, Sendable {
    public var challenge: String
    public var expiresAt: Int64

    public init(challenge: String, expiresAt: Int64) {
        self.challenge = challenge
        self.expiresAt = expiresAt
    }
}

/// A request that names only the device that signs it, with the key of `deviceId` over a single-use challenge from
/// POST /v1/challenges: a revocation, the account's device list, the account page's session.
public struct DeviceSignedRequest: Codable, Equatable, Sendable {
    public var deviceId: String
    public var challenge: String
    public var nonce: String

    public init(deviceId: String, challenge: String, nonce: String) {
        self.deviceId = deviceId
        self.challenge = challenge
        self.nonce = nonce
    }
}

public typealias RevokeRequest = DeviceSignedRequest

public struct RevocationResultMessage: Codable, Equatable, Sendable {
    public var nonce: String
    public var deviceId: String

    public init(nonce: String, deviceId: String) {
        self.nonce = nonce
        self.deviceId = deviceId
    }
}

extension ChallengeRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
    }
}

extension ChallengeMessage: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
    }
}

extension DeviceSignedRequest: LimitedMessage {
    public func checkLimits() throws(LimitViolation) {
        try Limit.text("deviceId", deviceId, maximum: WireLimit.identifier, allowsEmpty: true)
        try Limit.text("challenge", challenge, maximum: WireLimit.nonce)
        try Limit.text("nonce", nonce, maximum: WireLimit.nonce)
    }
}
