import Foundation
import XignCrypto
import XignProtocol

/// The manager's long-lived secrets, both generated at first start and stored 0600 outside the database.
public struct ManagerSecrets: Sendable {
    /// Signs every answer that changes trust. Its fingerprint goes into the activation data.
    public let signingKey: P256PrivateKey
    /// Keyed into every PIN verifier, so a copy of the database alone cannot test PIN guesses.
    let pinPepper: Data

    public static func loadOrCreate(signingKeyPath: String, pepperPath: String) throws -> ManagerSecrets {
        ManagerSecrets(
            signingKey: try loadOrCreateSigningKey(signingKeyPath),
            pinPepper: try loadOrCreatePepper(pepperPath)
        )
    }

    /// Loads both files, which must exist: the database already names the key and pepper they hold.
    static func load(signingKeyPath: String, pepperPath: String) throws -> ManagerSecrets {
        for path in [signingKeyPath, pepperPath] where !FileManager.default.fileExists(atPath: path) {
            throw ManagerError.internalFailure("""
                \(path) is missing, but the database was set up with a signing key and PIN pepper already. Every manager instance \
                on one database needs the same files: copy signing-key.pem and pin-pepper (mode 0600) from the first instance
                """)
        }
        return try loadOrCreate(signingKeyPath: signingKeyPath, pepperPath: pepperPath)
    }

    /// What the database records of these secrets, so an instance with other files is refused before it answers anyone.
    var identity: (signingKey: String, pepper: String) {
        get throws { (try signingKey.publicKey.fingerprint, Base64URL.encode(HMACSHA256.authenticationCode(for: Data("xign pepper check".utf8), key: pinPepper))) }
    }

    private static func loadOrCreateSigningKey(_ path: String) throws -> P256PrivateKey {
        try AtomicFile.makeDirectory(AtomicFile.parent(of: path))
        if let pem = try AtomicFile.read(path, limit: 4096) {
            try checkPrivate(path)
            do { return try P256PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self)) } catch {
                throw ManagerError.internalFailure("signing key \(path) cannot be read (\(error)); restore it from backup. A new key would orphan every enrolled device")
            }
        }
        let key = try P256PrivateKey()
        try AtomicFile.write(Data(try key.pemRepresentation().utf8), to: path, mode: 0o600)
        return key
    }

    private static func loadOrCreatePepper(_ path: String) throws -> Data {
        try AtomicFile.makeDirectory(AtomicFile.parent(of: path))
        if let pepper = try AtomicFile.read(path, limit: 64) {
            try checkPrivate(path)
            guard pepper.count == 32 else {
                throw ManagerError.internalFailure("PIN pepper \(path) is not 32 bytes; restore it from backup. A new pepper would invalidate every PIN")
            }
            return pepper
        }
        let pepper = try SecureRandom.bytes(32)
        try AtomicFile.write(pepper, to: path, mode: 0o600)
        return pepper
    }

    private static func checkPrivate(_ path: String) throws {
        var st = stat()
        guard stat(path, &st) == 0 else { return }
        if st.st_mode & 0o077 != 0 {
            throw ManagerError.internalFailure("\(path) is readable by group or others (mode \(String(st.st_mode & 0o777, radix: 8))); run: chmod 600 \(path)")
        }
    }

    /// verifier = HMAC-SHA256(pepper, PBKDF2-SHA256(pin, salt, iterations)). docs/protocol.md gives the reasons.
    func pinVerifier(pin: String, salt: Data, iterations: Int) throws -> Data {
        HMACSHA256.authenticationCode(for: try PBKDF2.deriveKey(password: Data(pin.utf8), salt: salt, iterations: iterations), key: pinPepper)
    }
}
