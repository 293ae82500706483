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
    let logger: Logger
    /// Signs the answers that change trust.
    let signer: AnswerSigner
    let services: ServiceCatalog
    let loginTokens: LoginTokens
    private let boundURL: NIOLockedValueBox<ManagerURL?>
    /// The one check of a signed request.
    let verifier: RequestVerifier
    /// Names this instance's PIN-check claims; the same across restarts (PINChecker).
    let instanceId: String
    /// The one PIN check, with the lockout.
    let pinChecker: PINChecker
    /// The long polls of confirmations, and what wakes them.
    let wakeUps: WakeUps
    let rateLimiter: RateLimiter
    /// A device taking an activation.
    let enrolments: Enrolments
    /// An account's waiting logins: their sources, room and codes.
    let confirmationQueue: ConfirmationQueue
    /// The checks of a TPM's attestation.
    let attestations: AttestationVerifier
    /// What an api access grant changes in an account.
    let accountChanges: AccountChanges
    /// Offline login's policy and the reports of offline attempts.
    let offline: OfflineLogins
    /// New accounts and activations.
    let activations: Activations
    let expiry: Expiry
    /// The typed code and the approval, for both approval protocols.
    let confirmations: ConfirmationDecision
    public let mail: MailQueue
    /// The organization's identity providers, for registrations through them.
    let identityProviders: IdentityProviders

    public init(configuration: ManagerConfiguration, database: Database, secrets: ManagerSecrets, logger: Logger) throws
    {
        self.configuration = configuration
        instanceId = try PINChecker.instanceId(in: AtomicFile.parent(of: configuration.databasePath))
        self.database = database
        self.secrets = secrets
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
        mail = MailQueue(database: database, configuration: configuration, recordKey: secrets.recordKey, logger: logger)
        activations = Activations(
            database: database, configuration: configuration, pinChecker: pinChecker, mail: mail, signer: signer,
            managerURL: verifier.managerURL, logger: logger)
        attestations = AttestationVerifier(caDirectory: configuration.attestationCADirectory, logger: logger)
        offline = OfflineLogins(database: database, configuration: configuration, logger: logger)
        enrolments = Enrolments(
            database: database, configuration: configuration, attestations: attestations, activations: activations,
            offline: offline, mail: mail, signer: signer, logger: logger)
        confirmationQueue = ConfirmationQueue(settings: configuration.confirmation)
        accountChanges = AccountChanges(
            database: database, configuration: configuration, secrets: secrets, pinChecker: pinChecker,
            activations: activations, mail: mail)
        rateLimiter = RateLimiter(database: database, limits: configuration.limits, logger: logger)
        expiry = Expiry(database: database, configuration: configuration)
        wakeUps = WakeUps(database: database, logger: logger)
        confirmations = ConfirmationDecision(
            database: database, settings: configuration.confirmation, wakeUps: wakeUps, logger: logger)
        identityProviders = try IdentityProviders(configuration)
    }

    /// Opens the store and the secrets named in `configuration`; the owner of the process sets umask 077 first.
    public static func open(configuration: ManagerConfiguration, logger: Logger) async throws -> IdentityManager {
        let database = try await Database.open(configuration, logger: logger)
        do {
            let secrets = try await ManagerSecrets.open(configuration, database: database)
            let manager = try IdentityManager(
                configuration: configuration, database: database, secrets: secrets, logger: logger)
            try await manager.loadBoundURL()
            return manager
        } catch {
            await database.close()
            throw error
        }
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
                PINSealingKeyMessage(key: secrets.publishedPINSealingKey), type: SignedAnswerType.pinSealingKey))
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
