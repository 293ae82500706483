import Foundation
import XignCrypto
import XignProtocol
import XignWebAuthn

/// A WebAuthn authenticator in software, for the checks a browser will not let a test make: an assertion for another
/// origin or RP id, a counter that goes back, flags a real authenticator never sets. Its output has the exact shape
/// a browser's has (the parser tests compare both against Chromium's).
public final class SoftwarePasskey: @unchecked Sendable {
    public let key: P256PrivateKey
    public let credentialId: Data
    public var signCount: UInt32
    /// UP, UV; BE and BS for a synced passkey.
    public var flags: UInt8

    public init(synced: Bool = false, signCount: UInt32 = 0) throws {
        key = try P256PrivateKey()
        credentialId = try SecureRandom.bytes(32)
        self.signCount = signCount
        flags = 0x05 | (synced ? 0x18 : 0)
    }

    public static func clientData(type: String, challenge: Data, origin: String) -> Data {
        Data(
            #"{"type":"\#(type)","challenge":"\#(Base64URL.encode(challenge))","origin":"\#(origin)","crossOrigin":false}"#
                .utf8)
    }

    private func authenticatorData(rpId: String, attested: Bool) throws -> Data {
        var data = SHA256.hash(rpId)
        data.append(flags | (attested ? 0x40 : 0))
        data.append(contentsOf: withUnsafeBytes(of: signCount.bigEndian, Array.init))
        guard attested else { return data }
        data.append(Data(repeating: 0, count: 16))
        data.append(contentsOf: [UInt8(credentialId.count >> 8), UInt8(credentialId.count & 0xff)])
        data.append(credentialId)
        let point = key.publicKey.point
        // {1: 2, 3: -7, -1: 1, -2: x, -3: y}
        data.append(contentsOf: [0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20])
        data.append(point[point.startIndex + 1..<point.startIndex + 33])
        data.append(contentsOf: [0x22, 0x58, 0x20])
        data.append(point.suffix(32))
        return data
    }

    /// `navigator.credentials.create` with attestation none: the attestation object and the clientDataJSON.
    public func register(
        challenge: Data, origin: String, rpId: String
    ) throws -> (attestationObject: Data, clientDataJSON: Data) {
        let data = try authenticatorData(rpId: rpId, attested: true)
        // {"fmt": "none", "attStmt": {}, "authData": data}
        var object = Data([0xa3, 0x63]) + Data("fmt".utf8) + Data([0x64]) + Data("none".utf8)
        object += Data([0x67]) + Data("attStmt".utf8) + Data([0xa0])
        object +=
            Data([0x68]) + Data("authData".utf8) + Data([0x59, UInt8(data.count >> 8), UInt8(data.count & 0xff)]) + data
        return (object, Self.clientData(type: "webauthn.create", challenge: challenge, origin: origin))
    }

    /// `navigator.credentials.get` over `challenge`; the counter grows by one first, as authenticators do.
    public func assert(
        challenge: Data, origin: String, rpId: String, clientData: Data? = nil
    ) throws -> PasskeyAssertion {
        signCount += 1
        let data = try authenticatorData(rpId: rpId, attested: false)
        let client = clientData ?? Self.clientData(type: "webauthn.get", challenge: challenge, origin: origin)
        let raw = try key.signature(for: data + SHA256.hash(client))
        return PasskeyAssertion(
            authenticatorData: data, clientDataJSON: client, signature: ECDSASignature.der(fromRaw: raw)!)
    }

    /// The `X-Xign-Signature` of a request to `path` with `body`, over the device challenge `challenge`.
    public func sign(path: String, body: Data, challenge: String, origin: String, rpId: String) throws -> String {
        let message = SignedRequest.canonicalMessage(method: "POST", path: path, body: body, challenge: challenge)
        return try assert(challenge: SHA256.hash(message), origin: origin, rpId: rpId).header
    }
}
