import FoundationEssentials

/// AES-256-GCM with a random nonce, for what the manager keeps at rest under a key of its own (queued mail):
/// nonce (12 bytes) || ciphertext || tag (16 bytes).
public enum SecretBox {
    public static func seal(_ plaintext: Data, key: Data) throws -> Data {
        let nonce = try SecureRandom.bytes(12)
        return nonce + (try AESGCM.seal(plaintext, key: key, nonce: nonce, associatedData: Data()))
    }

    public static func open(_ box: Data, key: Data) throws -> Data {
        guard box.count >= 12 + PINSeal.tagLength else { throw CryptoError("a sealed record is too short") }
        return try AESGCM.open(Data(box.dropFirst(12)), key: key, nonce: Data(box.prefix(12)), associatedData: Data())
    }
}
