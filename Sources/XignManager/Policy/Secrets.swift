import Foundation
import XignCrypto
import XignDevice
import XignManagerConfiguration
import XignProtocol

/// A PIN verifier as an activation stores it: salt and value, and the cost and pepper it was made with.
struct PINVerifier: Sendable {
    var salt: Data
    var value: Data
    var iterations: Int
    var pepper: PINPepperKind
}

/// The manager's long-lived secrets, generated at first start and kept outside the database.
public struct ManagerSecrets: Sendable {
    /// Signs every answer that changes trust. Its fingerprint goes into the activation data.
    public let signingKey: P256PrivateKey
    /// Opens the PINs clients seal; published signed by `signingKey`. A key of its own, so the signing key only signs.
    let pinSealingKey: P256PrivateKey
    /// The pepper new verifiers are made with.
    let pepperKind: PINPepperKind
    /// Keyed into every PIN verifier, so a copy of the database alone cannot test PIN guesses.
    let filePepper: Data?
    let tpmPepper: TPMHMACKey?
    /// For what the database keeps about people but should not show to whoever copies it: queued mail (sealed) and
    /// the addresses of deleted accounts in the audit (a keyed hash). From the signing key, which every instance has.
    let recordKey: Data

    /// What the database recorded of the secrets, and which peppers its verifiers use.
    struct Recorded: Sendable {
        var signingKey: String?
        var pinSealingKey: String?
        var checks: [PINPepperKind: String]
        var verifiers: Set<PINPepperKind>
    }

    /// The key files `configuration` names, created where the database has recorded none yet.
    static func open(_ configuration: ManagerConfiguration, recorded: Recorded) throws -> ManagerSecrets {
        let copyAdvice =
            "every manager instance on one database needs the same files: copy signing-key.pem, pin-sealing-key.pem and pin-pepper (mode 0600) from the first instance"
        func mustExist(_ path: String) throws {
            guard FileManager.default.fileExists(atPath: path) else {
                throw ManagerError.internalFailure(
                    "\(path) is missing, but the database was set up with it already; \(copyAdvice)")
            }
        }
        if recorded.signingKey != nil { try mustExist(configuration.signingKeyPath) }
        let signingKey = try loadOrCreateKey(configuration.signingKeyPath, orphaning: "every enrolled device")
        if recorded.pinSealingKey != nil { try mustExist(configuration.pinSealingKeyPath) }
        let pinSealingKey = try loadOrCreateKey(
            configuration.pinSealingKeyPath, orphaning: "every PIN a client sealed to the old one")

        var filePepper: Data?
        let filePepperNeeded = configuration.pinPepperKind == .file || recorded.verifiers.contains(.file)
        if filePepperNeeded {
            if recorded.checks[.file] != nil || configuration.pinPepperKind != .file {
                try mustExist(configuration.pepperPath)
            }
            filePepper = try loadOrCreatePepper(configuration.pepperPath)
        }

        var tpmPepper: TPMHMACKey?
        let tpmPath = configuration.pepperTPMPath
        if configuration.pinPepperKind == .tpm || recorded.verifiers.contains(.tpm) {
            if recorded.checks[.tpm] != nil || configuration.pinPepperKind != .tpm {
                guard FileManager.default.fileExists(atPath: tpmPath) else {
                    throw ManagerError.internalFailure(
                        """
                        \(tpmPath) is missing, but PIN verifiers in the database were made with it. Restore it from backup on the machine \
                        whose TPM created it; pin_pepper = tpm binds PINs to one machine, so several instances need the file pepper
                        """)
                }
            }
            tpmPepper = try loadOrCreateTPMPepper(tpmPath, tcti: configuration.tcti)
        }
        let recordKey = HKDF.derive(
            secret: Data(try signingKey.pemRepresentation().utf8), salt: Data(), info: Data("xign records v1".utf8),
            length: 32)
        return ManagerSecrets(
            signingKey: signingKey, pinSealingKey: pinSealingKey, pepperKind: configuration.pinPepperKind,
            filePepper: filePepper,
            tpmPepper: tpmPepper, recordKey: recordKey)
    }

    private static let checkMessage = Data("xign pepper check".utf8)

    /// What the database records of these secrets, so an instance with other files is refused before it answers anyone.
    var identity: (signingKey: String, pinSealingKey: String, checks: [PINPepperKind: String]) {
        get throws {
            var checks: [PINPepperKind: String] = [:]
            if let filePepper {
                checks[.file] = Base64URL.encode(HMACSHA256.authenticationCode(for: Self.checkMessage, key: filePepper))
            }
            if let tpmPepper {
                checks[.tpm] = Base64URL.encode(try tpmPepper.authenticationCode(for: Self.checkMessage))
            }
            return (signingKey.publicKey.fingerprint, pinSealingKey.publicKey.fingerprint, checks)
        }
    }

    /// A P-256 key from its PEM file, made there at first start; `orphaning` says what a new one would lose.
    private static func loadOrCreateKey(_ path: String, orphaning: String) throws -> P256PrivateKey {
        try AtomicFile.makeDirectory(AtomicFile.parent(of: path))
        if let pem = try AtomicFile.read(path, limit: 4096) {
            try checkPrivate(path)
            do { return try P256PrivateKey(pemRepresentation: String(decoding: pem, as: UTF8.self)) } catch {
                throw ManagerError.internalFailure(
                    "key \(path) cannot be read (\(error)); restore it from backup. A new key would orphan \(orphaning)"
                )
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
                throw ManagerError.internalFailure(
                    "PIN pepper \(path) is not 32 bytes; restore it from backup. A new pepper would invalidate every PIN"
                )
            }
            return pepper
        }
        let pepper = try SecureRandom.bytes(32)
        try AtomicFile.write(pepper, to: path, mode: 0o600)
        return pepper
    }

    private static func loadOrCreateTPMPepper(_ path: String, tcti: String) throws -> TPMHMACKey {
        try AtomicFile.makeDirectory(AtomicFile.parent(of: path))
        let blob: Data
        if let stored = try AtomicFile.read(path, limit: 4096) {
            try checkPrivate(path)
            blob = stored
        } else {
            do { blob = try TPMHMACKey.create(tcti: tcti) } catch {
                throw ManagerError.internalFailure("cannot create the PIN pepper in the TPM: \(error)")
            }
            try AtomicFile.write(blob, to: path, mode: 0o600)
        }
        do { return try TPMHMACKey(tcti: tcti, blob: blob) } catch {
            throw ManagerError.internalFailure(
                """
                the TPM PIN pepper \(path) does not load (\(error)). It only works in the TPM that created it; \
                PIN verifiers made with it cannot be checked elsewhere
                """)
        }
    }

    private static func checkPrivate(_ path: String) throws {
        var st = stat()
        guard stat(path, &st) == 0 else { return }
        if st.st_mode & 0o077 != 0 {
            throw ManagerError.internalFailure(
                "\(path) is readable by group or others (mode \(String(st.st_mode & 0o777, radix: 8))); run: chmod 600 \(path)"
            )
        }
    }

    /// verifier = HMAC-SHA256(pepper, PBKDF2-SHA256(pin, salt, iterations)). docs/protocol.md gives the reasons.
    func pinVerifier(pin: String, salt: Data, iterations: Int, pepper: PINPepperKind) throws -> Data {
        let stretched = try PBKDF2.deriveKey(password: Data(pin.utf8), salt: salt, iterations: iterations)
        switch pepper {
        case .file:
            guard let filePepper else {
                throw ManagerError.internalFailure(
                    "a PIN verifier uses the file pepper, which is not loaded; set keys.pin_pepper to its path")
            }
            return HMACSHA256.authenticationCode(for: stretched, key: filePepper)
        case .tpm:
            guard let tpmPepper else {
                throw ManagerError.internalFailure(
                    "a PIN verifier uses the TPM pepper, which is not loaded; set keys.pin_pepper = tpm")
            }
            return try tpmPepper.authenticationCode(for: stretched)
        }
    }
}

extension ManagerSecrets {
    /// The key files, checked against what the database recorded when it was set up: instances that share a
    /// database must share the signing key and the pepper, or their signatures and PIN checks disagree.
    static func open(
        _ configuration: ManagerConfiguration, database: Database
    ) async throws -> ManagerSecrets {
        let recorded = try await database.transaction { store in
            ManagerSecrets.Recorded(
                signingKey: try await store.setting("signing_key_fingerprint"),
                pinSealingKey: try await store.setting("pin_sealing_key_fingerprint"),
                checks: try await pepperChecks(store),
                verifiers: try await store.pinPepperKindsInUse()
            )
        }
        let secrets = try ManagerSecrets.open(configuration, recorded: recorded)
        let identity = try secrets.identity
        if let recordedKey = recorded.signingKey, recordedKey != identity.signingKey {
            throw ManagerError.internalFailure(
                "\(configuration.signingKeyPath) is not the signing key this database was set up with; copy signing-key.pem from the first instance (or restore it from backup)"
            )
        }
        if let recordedKey = recorded.pinSealingKey, recordedKey != identity.pinSealingKey {
            throw ManagerError.internalFailure(
                "\(configuration.pinSealingKeyPath) is not the PIN-sealing key this database was set up with; copy pin-sealing-key.pem from the first instance (or restore it from backup)"
            )
        }
        for (kind, check) in identity.checks where recorded.checks[kind].map({ $0 != check }) ?? false {
            throw ManagerError.internalFailure(
                kind == .file
                    ? "\(configuration.pepperPath) is not the PIN pepper this database was set up with; copy pin-pepper from the first instance (or restore it from backup)"
                    : "\(configuration.pepperTPMPath) is not the TPM PIN pepper this database was set up with (another machine's TPM, or a cleared one); PINs checked with it cannot be verified here"
            )
        }
        guard
            recorded.signingKey == nil || recorded.pinSealingKey == nil
                || identity.checks.contains(where: { recorded.checks[$0.key] == nil })
        else { return secrets }
        try await database.transaction { store in
            if let other = try await store.setting("signing_key_fingerprint"), other != identity.signingKey {
                throw ManagerError.internalFailure(
                    "another instance set this database up with another signing key a moment ago; copy its signing-key.pem, pin-sealing-key.pem and pin-pepper here"
                )
            }
            try await store.setSetting("signing_key_fingerprint", to: identity.signingKey)
            switch try await store.setting("pin_sealing_key_fingerprint") {
            case nil: try await store.setSetting("pin_sealing_key_fingerprint", to: identity.pinSealingKey)
            case identity.pinSealingKey: break
            default:
                throw ManagerError.internalFailure(
                    "another instance set this database up with another PIN-sealing key a moment ago; copy its pin-sealing-key.pem here"
                )
            }
            for (kind, check) in identity.checks {
                let setting = pepperCheckSetting(kind)
                switch try await store.setting(setting) {
                case nil: try await store.setSetting(setting, to: check)
                case check: break
                default:
                    throw ManagerError.internalFailure(
                        "another instance set this database up with another PIN pepper a moment ago; copy its pin-pepper here"
                    )
                }
            }
        }
        return secrets
    }

    private static func pepperCheckSetting(_ kind: PINPepperKind) -> String {
        kind == .file ? "pin_pepper_check" : "pin_pepper_tpm_check"
    }

    private static func pepperChecks(_ store: ManagerStore) async throws -> [PINPepperKind: String] {
        var checks: [PINPepperKind: String] = [:]
        for kind in [PINPepperKind.file, .tpm] { checks[kind] = try await store.setting(pepperCheckSetting(kind)) }
        return checks
    }
}

extension ManagerSecrets {
    /// What stands for `email` in the audit once its account is deleted: the same for the same address (so an
    /// administrator who knows it can find the entries, `admin audit --email`), and nothing that gives it back.
    func pseudonym(ofEmail email: String) -> String {
        let code = HMACSHA256.authenticationCode(
            for: Data("audit-email\n\(email.lowercased())".utf8), key: recordKey)
        return "deleted-" + Base64URL.encode(code.prefix(16))
    }
}

extension ManagerSecrets {
    /// The PIN-sealing key as clients take it: SPKI DER, base64url.
    var publishedPINSealingKey: String { Base64URL.encode(pinSealingKey.publicKey.derRepresentation) }
}

extension ManagerSecrets {
    /// `text` sealed with the record key, for a row that holds a secret only until its owner takes it.
    func seal(_ text: String) throws -> String { Base64URL.encode(try SecretBox.seal(Data(text.utf8), key: recordKey)) }

    func open(_ sealed: String) throws -> String {
        guard let box = Base64URL.decode(sealed), let opened = try? SecretBox.open(box, key: recordKey),
            let text = String(bytes: opened, encoding: .utf8)
        else { throw ManagerError.internalFailure("a sealed row does not open with this manager's record key") }
        return text
    }
}
