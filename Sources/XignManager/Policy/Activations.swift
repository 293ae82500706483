import Foundation
import Logging
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// New accounts and activations: the activation secret and the PIN's verifier, the payload the QR code and the mail
/// carry, and an account written with its first activation and its mail in one transaction. Registration, the
/// administrator and a device's request for a new activation all make them here.
struct Activations: Sendable {
    let database: Database
    let configuration: ManagerConfiguration
    let pinChecker: PINChecker
    let mail: MailQueue
    let signer: AnswerSigner
    let managerURL: @Sendable () -> ManagerURL
    let logger: Logger

    func isEmailTaken(_ email: String) async throws -> Bool {
        try await database.transaction { store in try await store.isEmailTaken(email) }
    }

    func isLoginNameTaken(_ loginName: String) async throws -> Bool {
        try await database.transaction { store in try await store.isLoginNameTaken(loginName) }
    }

    /// Creates an account with its first activation and queues the activation mail; returns the activation's alias.
    func createAccount(
        _ account: IdentityManager.NewAccount, pin: String, alias: String?, by actor: String
    ) async throws -> String {
        try await createAccount(
            account, activation: try makeActivation(pin: pin), alias: alias, by: actor, mailed: true)
    }

    /// Makes the account with its first activation; `mailed` sends the activation data to its address, as a
    /// registration by mail does (a registration through an identity provider hands it to its client instead).
    func createAccount(
        _ account: IdentityManager.NewAccount, activation: IdentityManager.ActivationSecrets, alias: String?,
        by actor: String, mailed: Bool
    ) async throws -> String {
        let chosenAlias = alias ?? "Activation 1"
        let mailId: String?
        do {
            mailId = try await database.transaction { store in
                try await self.insert(account, activation: activation, alias: chosenAlias, by: actor, in: store)
                let mail = Outbox.activationMail(
                    to: account.email, alias: chosenAlias, payload: self.payload(for: activation))
                return mailed ? try await self.mail.queue(mail, in: store) : nil
            }
        } catch {
            throw try await explained(error, creating: account)
        }
        if let mailId { await self.mail.deliver(id: mailId) }
        return chosenAlias
    }

    /// Inserts the account with its first activation, its uid and host groups, and audits it, in `store`'s
    /// transaction.
    func insert(
        _ account: IdentityManager.NewAccount, activation: IdentityManager.ActivationSecrets, alias: String,
        by actor: String, in store: ManagerStore
    ) async throws {
        let record = ManagerStore.NewAccount(
            id: try SecureRandom.identifier(), email: account.email, loginName: account.loginName,
            attributes: String(decoding: try JSONEncoder.canonical.encode(account.attributes), as: UTF8.self),
            arbitraryAttributes: try account.arbitraryAttributes.map {
                String(decoding: try JSONEncoder.canonical.encode($0), as: UTF8.self)
            },
            serviceMappingId: account.serviceMappingId, organization: account.organization,
            createdAt: IdentityManager.now()
        )
        try await store.insertAccount(record)
        if record.loginName != nil {
            try await store.assignUnixId(accountId: record.id, range: configuration.uidRange)
        }
        if !account.hostGroups.isEmpty {
            try await store.setHostGroups(account.hostGroups, accountId: record.id)
        }
        try await store.insertActivation(
            activation.record(
                accountId: record.id, alias: alias, deviceId: nil,
                validFor: configuration.activationDataLifetimeMilliseconds))
        try await store.recordAudit(
            AuditEvent(
                .accountCreated, email: record.email, activationId: activation.id,
                detail: account.organization.map { "organization invite from \($0)" } ?? account.origin,
                actor: actor
            ))
    }

    /// Refuses an account whose address or login name another account has, with which.
    func checkFree(_ account: IdentityManager.NewAccount) async throws {
        if try await isEmailTaken(account.email) {
            throw ManagerError(
                .unprocessableContent, .registrationRejected,
                "\(account.email) has an account here already; add this device from one of its devices (xign-setup new-activation) or ask your administrator",
                attributes: ["email": .notAvailable])
        }
        if let loginName = account.loginName, try await isLoginNameTaken(loginName) {
            throw ManagerError(
                .unprocessableContent, .registrationRejected,
                "another account has the login name \(loginName); ask your administrator",
                attributes: [AttributeValidator.loginName: .notAvailable])
        }
    }

    /// What a failed insert of `account` means: a UNIQUE constraint (address, login name) that lost a race against a
    /// concurrent registration is a refusal that says which; anything else is itself.
    func explained(_ error: any Error, creating account: IdentityManager.NewAccount) async throws -> any Error {
        if error is ManagerError { return error }
        if try await isEmailTaken(account.email) {
            return ManagerError(
                .unprocessableContent, .registrationRejected, "the email address is already registered",
                attributes: ["email": .notAvailable])
        }
        if let loginName = account.loginName, try await isLoginNameTaken(loginName) {
            return ManagerError(
                .unprocessableContent, .registrationRejected, "the login name is already taken",
                attributes: [AttributeValidator.loginName: .notAvailable])
        }
        return error
    }

    func makeActivation(pin: String) throws -> IdentityManager.ActivationSecrets {
        try makeActivation(verifier: try pinChecker.makeVerifier(pin: pin))
    }

    /// An activation for a PIN whose verifier was made earlier (a registration through an identity provider).
    func makeActivation(verifier: PINVerifier) throws -> IdentityManager.ActivationSecrets {
        IdentityManager.ActivationSecrets(
            id: try SecureRandom.identifier(),
            // 128 bits in base32: enough against guessing (every guess also needs the PIN), and short for the QR code.
            secret: Base32.encode(try SecureRandom.bytes(16)), pin: verifier)
    }

    func payload(for activation: IdentityManager.ActivationSecrets) -> PersonalizationPayload {
        PersonalizationPayload(
            managerURL: managerURL(), activationId: activation.id, activationSecret: activation.secret,
            managerKeyFingerprint: signer.publicKey.shortFingerprint
        )
    }
}
