import FoundationEssentials
import XignCrypto

/// A PIN as it travels: sealed to the manager's pinned key (`PINSeal`) and bound to the one request it belongs to.
/// The manager refuses a PIN in the clear.
public struct SealedPINMessage: Codable, Equatable, Sendable {
    /// base64url of the ephemeral public point (uncompressed, 65 bytes).
    public var epk: String
    /// base64url of the AES-GCM ciphertext of the padded PIN and its tag.
    public var ct: String

    public init(epk: String, ct: String) {
        self.epk = epk
        self.ct = ct
    }

    public init(sealing pin: String, to managerKey: P256PublicKey, for binding: PINBinding) throws {
        let sealed = try PINSeal.seal(pin, to: managerKey, binding: binding.data)
        self.init(epk: Base64URL.encode(sealed.ephemeralPoint), ct: Base64URL.encode(sealed.ciphertext))
    }

    /// The PIN, or nil when the seal is malformed, was made for another key or request, or was changed on the way.
    public func open(with key: P256PrivateKey, for binding: PINBinding) -> String? {
        guard epk.utf8.count <= 100, ct.utf8.count <= 120, let point = Base64URL.decode(epk),
            let ciphertext = Base64URL.decode(ct)
        else {
            return nil
        }
        return try? PINSeal.open(.init(ephemeralPoint: point, ciphertext: ciphertext), with: key, binding: binding.data)
    }
}

/// What a sealed PIN is bound to: the request it was made for, so it cannot be moved to another one.
public struct PINBinding: Sendable, Equatable {
    let data: Data

    private init(_ parts: String...) { data = Data((["xign-pin-v1"] + parts).joined(separator: "\n").utf8) }

    /// A registration: no challenge exists yet, and nothing secret to bind to.
    public static func registration(categoryId: String) -> PINBinding { PINBinding("registration", categoryId) }
    /// A personalization's PIN check: the activation and the client's nonce.
    public static func decrypt(activationId: String, nonce: String) -> PINBinding {
        PINBinding("decrypt", activationId, nonce)
    }
    /// An authentication's PIN factor: the authentication and the challenge its start answer gave.
    public static func authentication(id: String, challenge: String) -> PINBinding {
        PINBinding("authentication", id, challenge)
    }
    /// The new PIN of a process the manager granted (changePin, requestNewActivation).
    public static func grant(_ grant: String) -> PINBinding { PINBinding("grant", grant) }
    /// A confirmation approved in one request (the browser's): the confirmation and the device challenge it is signed over.
    public static func approval(confirmationId: String, challenge: String) -> PINBinding {
        PINBinding("approval", confirmationId, challenge)
    }
    /// A registration through an identity provider: the provider and the client's nonce.
    public static func providerRegistration(provider: String, nonce: String) -> PINBinding {
        PINBinding("provider-registration", provider, nonce)
    }
    /// The new activation's PIN of a rePersonalization: its session.
    public static func personalization(sessionId: String) -> PINBinding { PINBinding("personalization", sessionId) }
}
