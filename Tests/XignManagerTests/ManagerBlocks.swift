import Foundation
import Logging
import Testing
import XignCrypto
import XignManagerConfiguration
import XignProtocol
import XignTestSupport

@testable import XignManager

/// A manager's building blocks over SQLite in a temporary directory, and the rows a block's test starts from, written
/// as the processes write them: accounts, enrolled devices, a host and its waiting logins. No server runs.
struct ManagerBlocks {
    let manager: IdentityManager
    let files: ManagerFiles
    /// The one host the waiting logins come from.
    static let hostId = "host-1"

    static func with(
        config: String = ManagerFiles.testConfig, _ body: (ManagerBlocks) async throws -> Void
    ) async throws {
        let files = try ManagerFiles(config: config)
        try await IdentityManager.opened(try files.configuration(), logger: Logger(label: "test")) { manager in
            let blocks = ManagerBlocks(manager: manager, files: files)
            try await blocks.write { store in
                try await store.insertHost(
                    id: hostId, name: "db1",
                    publicKey: Base64URL.encode(try P256PrivateKey().publicKey.derRepresentation),
                    keyKind: .software, ekIssuer: nil, unattestedBecause: nil, createdAt: IdentityManager.now())
            }
            try await body(blocks)
        }
    }

    func write<T: Sendable>(_ body: @Sendable @escaping (ManagerStore) async throws -> T) async throws -> T {
        try await manager.database.transaction(body)
    }

    func read<T: Sendable>(_ body: @Sendable @escaping (ManagerStore) async throws -> T) async throws -> T {
        try await manager.database.read(body)
    }

    struct Account {
        var id: String
        var activationId: String
        var email: String
    }

    /// An account with its first activation, made as registration makes it.
    func account(_ email: String = "alice@example.org", pin: String = "24680") async throws -> Account {
        _ = try await manager.activations.createAccount(
            IdentityManager.NewAccount(email: email, loginName: nil, attributes: [:]), pin: pin, alias: nil, by: "test")
        let activationId = try #require(try await manager.administration.activations(email: email).first).id
        let activation = try #require(try await read { try await $0.activation(id: activationId) })
        return Account(id: activation.accountId, activationId: activationId, email: email)
    }

    struct Device {
        var id: String
        var key: P256PrivateKey
    }

    /// A device that took the account's activation, as personalization stores it.
    func enrolDevice(
        of account: Account, kind: KeyKind = .software, passkey: ManagerStore.Passkey? = nil, ekIssuer: String? = nil
    ) async throws -> Device {
        let device = Device(id: try SecureRandom.identifier(), key: try P256PrivateKey())
        let record = ManagerStore.NewDevice(
            id: device.id, activationId: account.activationId,
            publicKey: Base64URL.encode(device.key.publicKey.derRepresentation), keyKind: kind, name: "laptop",
            platform: "linux", createdAt: IdentityManager.now(), passkey: passkey, ekIssuer: ekIssuer,
            unattestedBecause: kind == .tpm && ekIssuer == nil ? "no EK certificate" : nil)
        try await write { store in
            try await store.personalize(activationId: account.activationId, deviceId: device.id)
            try await store.insertDevice(record)
        }
        return device
    }

    /// A single-use challenge for a request `device` signs.
    func challenge(for device: Device, expiresAt: Int64 = IdentityManager.now() + 60_000) async throws -> String {
        let challenge = ChallengeMessage(challenge: try SecureRandom.token(), expiresAt: expiresAt)
        try await write { try await $0.insertDeviceChallenge(challenge, deviceId: device.id) }
        return challenge.challenge
    }

    /// A login to the host from `remoteHost` whose code is `code`, not yet stored.
    static func login(
        for account: Account, from remoteHost: String = "192.0.2.1", code: String = "123456",
        createdAt: Int64 = IdentityManager.now()
    ) throws -> ManagerStore.ConfirmationRecord {
        ManagerStore.ConfirmationRecord(
            id: try SecureRandom.identifier(), hostId: hostId, hostName: "db1", accountId: account.id,
            loginName: "alice", service: "sshd", remoteHost: remoteHost,
            source: ConfirmationQueue.source(hostId: hostId, remoteHost: remoteHost), tty: nil, command: nil,
            nonce: try SecureRandom.token(), waitTokenHash: "-", code: code, codeFailures: 0, state: .pending,
            approvedBy: nil, createdAt: createdAt, expiresAt: createdAt + 90_000, openedAt: nil)
    }

    /// A login waiting for approval, stored as the host's request stores it.
    func waitingLogin(
        for account: Account, from remoteHost: String = "192.0.2.1", code: String = "123456",
        createdAt: Int64 = IdentityManager.now()
    ) async throws -> ManagerStore.ConfirmationRecord {
        let record = try Self.login(for: account, from: remoteHost, code: code, createdAt: createdAt)
        try await write { try await $0.insertConfirmation(record) }
        return record
    }

    func confirmation(_ id: String) async throws -> ManagerStore.ConfirmationRecord {
        try #require(try await read { try await $0.confirmation(id) })
    }

    func activation(_ id: String) async throws -> ManagerStore.ActivationRecord {
        try #require(try await read { try await $0.activation(id: id) })
    }

    func audit() async throws -> [AuditEvent] {
        try await read { try await $0.auditEvents(since: 0, limit: 1_000) }
    }

    /// The messages delivered into the manager's maildir, oldest first.
    func deliveredMail() throws -> [String] {
        try files.mails().map { try String(contentsOfFile: $0, encoding: .utf8) }
    }

    /// Whether `text` stands anywhere in the database's files (the SQLite file and its WAL), as someone who copies
    /// them would find it.
    func databaseFilesHold(_ text: String) -> Bool {
        let path = manager.configuration.databasePath
        return [path, path + "-wal"].compactMap { FileManager.default.contents(atPath: $0) }
            .contains { $0.range(of: Data(text.utf8)) != nil }
    }
}
