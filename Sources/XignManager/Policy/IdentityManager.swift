import Foundation
import Logging
import NIOConcurrencyHelpers
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The identity manager's behaviour, independent of HTTP: the HTTP controllers and `xign-manager admin` both call it.
/// Each process has its file (`IdentityManager+Registration`, `+Personalization`, …); rows live in `ManagerStore`.
public final class IdentityManager: Sendable {
    public let configuration: ManagerConfiguration
    public let database: Database
    let secrets: ManagerSecrets
    let outbox: Outbox
    let logger: Logger
    /// Signs the answers that change trust.
    let signer: AnswerSigner
    let services: ServiceCatalog
    let loginTokens: LoginTokens
    private let boundURL: NIOLockedValueBox<ManagerURL?>
    /// The one check of a signed request.
    let verifier: RequestVerifier
    /// Names this instance's PIN-check claims; the same across restarts (IdentityManager+PINCheck).
    let instanceId: String
    /// The one PIN check, with the lockout.
    let pinChecker: PINChecker
    /// Wakes long polls of confirmations (IdentityManager+Confirmations).
    let signals = Signals()
    let wakeUps: WakeUps
    /// The typed code and the approval, for both approval protocols.
    let confirmations: ConfirmationDecision
    /// Wakes the mail relay when mail was queued (IdentityManager+Mail).
    let mailQueued: AsyncStream<Void>.Continuation
    let mailQueue: AsyncStream<Void>

    public init(configuration: ManagerConfiguration, database: Database, secrets: ManagerSecrets, logger: Logger) throws
    {
        self.configuration = configuration
        instanceId = try Self.instanceId(in: AtomicFile.parent(of: configuration.databasePath))
        self.database = database
        self.secrets = secrets
        self.outbox = Outbox(path: configuration.outboxPath)
        self.logger = logger
        signer = AnswerSigner(key: secrets.signingKey)
        let boundURL = NIOLockedValueBox<ManagerURL?>(nil)
        self.boundURL = boundURL
        verifier = RequestVerifier(
            managerURL: {
                configuration.publicURL ?? boundURL.withLockedValue { $0 } ?? configuration.effectivePublicURL
            },
            requireHardwareKey: configuration.requireHardwareKey)
        services = ServiceCatalog(configured: configuration.services)
        loginTokens = LoginTokens(database: database, services: services, signer: signer)
        pinChecker = PINChecker(
            database: database, configuration: configuration, secrets: secrets, logger: logger, instanceId: instanceId)
        wakeUps = WakeUps(signals: signals, database: database, logger: logger)
        confirmations = ConfirmationDecision(
            database: database, settings: configuration.confirmation, wakeUps: wakeUps, logger: logger)
        (mailQueue, mailQueued) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    /// Opens the store and the secrets named in `configuration`; the owner of the process sets umask 077 first.
    public static func open(configuration: ManagerConfiguration, logger: Logger) async throws -> IdentityManager {
        let database = try await Database.open(configuration, logger: logger)
        do {
            let secrets = try await openSecrets(configuration, database: database)
            let manager = try IdentityManager(
                configuration: configuration, database: database, secrets: secrets, logger: logger)
            try await manager.loadBoundURL()
            return manager
        } catch {
            await database.close()
            throw error
        }
    }

    /// The key files, checked against what the database recorded when it was set up: instances that share a
    /// database must share the signing key and the pepper, or their signatures and PIN checks disagree.
    private static func openSecrets(
        _ configuration: ManagerConfiguration, database: Database
    ) async throws -> ManagerSecrets {
        let recorded = try await database.transaction { store in
            ManagerSecrets.Recorded(
                signingKey: try await store.setting("signing_key_fingerprint"),
                pinSealingKey: try await store.setting("pin_sealing_key_fingerprint"),
                checks: try await Self.pepperChecks(store),
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
                let setting = Self.pepperCheckSetting(kind)
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

    /// The id in `directory`/instance-id, created at first start.
    private static func instanceId(in directory: String) throws -> String {
        let path = directory + "/instance-id"
        if let stored = try AtomicFile.read(path, limit: 64),
            let id = String(data: stored, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines), !id.isEmpty
        {
            return id
        }
        let id = try SecureRandom.identifier()
        try AtomicFile.makeDirectory(directory)
        try AtomicFile.write(Data((id + "\n").utf8), to: path, mode: 0o600)
        return id
    }

    static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    static let maximumBodySize = 16 * 1024

    /// The URL the activation data names: the configured public URL, else the address actually bound.
    public var managerURL: ManagerURL { verifier.managerURL() }

    /// Called once the server listens, so that port 0 ("any free port") still yields a usable URL.
    /// The URL is kept in the database, so `xign-manager admin` names the same one in the mail it sends.
    public func didBind(host: String, port: Int) async throws {
        let host = host.contains(":") ? "[\(host)]" : host
        let url = try ManagerURL("\(configuration.tls == nil ? "http" : "https")://\(host):\(port)")
        boundURL.withLockedValue { $0 = url }
        try await database.transaction { store in try await store.setSetting("bound_url", to: url.description) }
    }

    private func loadBoundURL() async throws {
        let stored = try await database.transaction { store in try await store.setting("bound_url") }
        boundURL.withLockedValue { $0 = stored.flatMap { try? ManagerURL($0) } }
    }

    public func health() -> HealthMessage {
        HealthMessage(
            status: "ok", version: XignManagerVersion.string, managerKeyFingerprint: signer.publicKey.fingerprint,
            managerKey: Base64URL.encode(signer.publicKey.derRepresentation),
            pinSealingKey: try? signer.sign(
                PINSealingKeyMessage(key: pinSealingKey), type: SignedAnswerType.pinSealingKey))
    }

    /// A request body, decoded and checked against the wire's limits here, once, rather than by the route (a signed
    /// body is verified as it arrived); badRequest names `what`.
    static func decode<T: Decodable & LimitedMessage>(_ type: T.Type, from body: Data, _ what: String) throws -> T {
        try refuseClearPIN(in: body)
        let message: T
        do { message = try JSONDecoder().decode(T.self, from: body) } catch {
            throw ManagerError.badRequest("\(what) is not valid JSON of the expected shape")
        }
        do { try message.checkLimits() } catch { throw ManagerError.badRequest("\(what): \(error)") }
        return message
    }

    /// How secrets the manager hands out (activation secrets, join and wait tokens) are kept: only their SHA-256.
    static func hashed(_ secret: String) -> String { Base64URL.encode(SHA256.hash(secret)) }

}

extension IdentityManager {
    /// Called by `serve` before it answers: the PIN checks its predecessor left cut off are charged (PINChecker).
    @discardableResult
    public func settleAbandonedPINChecks() async throws -> Int { try await pinChecker.settleAbandonedChecks() }
}

public enum XignManagerVersion {
    public static let string = "0.1.0"
}
