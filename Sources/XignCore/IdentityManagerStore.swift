import FoundationEssentials
import Synchronization
import XignCrypto
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// One personalized activation on this machine, bound to one local user (the SDKs' IdentityManagerEntity).
public struct IdentityManagerEntity: Codable, Sendable, Equatable {
    /// The device id the manager assigned; names this enrolment everywhere.
    public var idmIdentifier: String
    public var managerURL: ManagerURL
    /// The manager's signing key (SPKI, base64url), pinned at personalization.
    public var managerKey: String
    public var activationId: String
    public var accountEmail: String
    public var alias: String
    public var localUser: String
    public var keyKind: KeyKind
    /// The device key's name in its key store.
    public var keyReference: String
    public var personalizedAt: Int64
    /// Factors added after personalization (add factor); nil in files from before factors could be added.
    public var addedFactors: [AuthenticatorType]?
    /// The digest of the user's enrolled fingers the biometric factor was added with (root reads this file only).
    public var biometricEnrolment: String?

    /// What this enrolment can sign with.
    public var factors: Set<AuthenticatorType> { Set(addedFactors ?? []).union([.device, .pin]) }

    /// The manager's signing key as pinned at personalization.
    func pinnedManagerKey() throws -> P256PublicKey {
        guard let der = Base64URL.decode(managerKey), let key = try? P256PublicKey(derRepresentation: der) else {
            throw XignSdkError(
                .stateUnavailable,
                "the pinned manager key of \(idmIdentifier) is damaged; personalize again, or use xign-setup remove --local-only"
            )
        }
        return key
    }
}

/// The machine's enrolments, in `<state_dir>/identity-managers.json`, mode 0600 in a 0700 directory.
///
/// Every change is a locked read-modify-write that replaces the file atomically, so a crash or a
/// full disk leaves the previous file in place. A damaged file is reported, never overwritten.
public struct IdentityManagerStore: Sendable {
    public let directory: String
    public static let maximumSize = 1024 * 1024
    let lastRead = LastRead()

    struct Contents: Codable {
        var version = 1
        var entries: [IdentityManagerEntity] = []
        /// Lockouts the manager reported in a signed answer, by activation id, on this host's clock,
        /// so the next attempt stops before asking again.
        var pendingLockouts: [String: PendingLockoutRecord] = [:]
        /// This machine as a host of managers (`xign-setup host join`); absent in files from before hosts existed.
        var hosts: [HostEnrolment]?
        /// Offline login, by enrolment (device id); absent in files from before it existed.
        var offline: [String: OfflineLoginRecord]?

        /// Drops an enrolment's offline record; returns its verifier, for the caller to delete once the file is saved.
        mutating func dropOfflineRecord(of idmIdentifier: String) -> String? {
            offline?.removeValue(forKey: idmIdentifier)?.verifier?.reference
        }
    }

    struct PendingLockoutRecord: Codable, Equatable {
        var isPermanent: Bool
        var lockedUntil: Int64
        /// Absent in files written before it was kept.
        var failedAttempts: Int?
    }

    public init(directory: String) { self.directory = directory }

    var path: String { "\(directory)/identity-managers.json" }
    var keyDirectory: String { "\(directory)/keys" }

    /// All enrolments; an empty list when nothing was ever personalized here.
    public func list() throws -> [IdentityManagerEntity] { try read().entries }

    /// The enrolment named by `idmIdentifier`.
    public func entity(_ idmIdentifier: String) throws -> IdentityManagerEntity {
        guard let entity = try list().first(where: { $0.idmIdentifier == idmIdentifier }) else {
            throw XignSdkError(
                .identityManagerNotFound,
                "no enrolment \(idmIdentifier.prefix(64)) on this machine; `xign-setup list` shows them")
        }
        return entity
    }

    func read() throws -> Contents {
        let identity = FileIdentity(of: path)
        if let identity, let kept = lastRead.contents(of: identity) { return kept }
        let data: Data?
        do { data = try AtomicFile.read(path, limit: Self.maximumSize) } catch {
            throw XignSdkError(.stateUnavailable, "cannot read the xign state: \(error); are you root?")
        }
        guard let data else { return Contents() }
        guard let contents = try? JSONDecoder().decode(Contents.self, from: data), contents.version == 1 else {
            throw XignSdkError(
                .stateUnavailable,
                "the xign state file \(path) is damaged; it was left as it is. Restore it from a backup, or move it away and personalize again"
            )
        }
        if let identity { lastRead.keep(contents, of: identity) }
        return contents
    }

    /// Makes sure the state directory exists, is private and can be written, before anything irreversible happens.
    public func checkWritable() throws {
        do {
            try AtomicFile.makeDirectory(directory, mode: 0o700, enforceMode: true)
            try AtomicFile.withExclusiveLock("\(directory)/.lock") {}
        } catch {
            throw XignSdkError(
                .stateUnavailable,
                "the state directory \(directory) cannot be written (\(error)); run as root or set state_dir in \(ClientConfiguration.defaultPath)"
            )
        }
    }

    @discardableResult
    func update<T>(_ change: (inout Contents) throws -> T) throws -> T {
        try checkWritable()
        do {
            return try AtomicFile.withExclusiveLock("\(directory)/.lock") {
                var contents = try read()
                let result = try change(&contents)
                let encoder = JSONEncoder.canonical
                encoder.outputFormatting.insert(.prettyPrinted)
                lastRead.forget()
                try AtomicFile.write(try encoder.encode(contents), to: path, mode: 0o600)
                return result
            }
        } catch let error as XignSdkError {
            throw error
        } catch {
            throw XignSdkError(.stateUnavailable, "cannot save the xign state in \(directory): \(error)")
        }
    }

    /// Drops the enrolment and its remembered lockout, then its device key (a key left behind is only clutter).
    func forget(_ entity: IdentityManagerEntity, keys: DeviceKeys) throws {
        let verifier = try update { contents -> String? in
            contents.entries.removeAll { $0.idmIdentifier == entity.idmIdentifier }
            contents.pendingLockouts[entity.activationId] = nil
            return contents.dropOfflineRecord(of: entity.idmIdentifier)
        }
        try? keys.store(for: entity.keyKind).delete(entity.keyReference)
        if let verifier { try? keys.pinVerifiers.delete(verifier) }
    }

    public func pendingLockout(activationId: String) throws -> LockoutAttemptInformation? {
        guard let record = try read().pendingLockouts[activationId] else { return nil }
        let until = Date(millisecondsSince1970: record.lockedUntil)
        guard record.isPermanent || until > Date() else { return nil }
        return LockoutAttemptInformation(
            isPermanent: record.isPermanent, lockedUntil: until, failedAttempts: record.failedAttempts ?? 0)
    }

    /// Remembers (or, with nil, forgets) a lock. Only a lock the manager signed over this attempt's nonce may be
    /// recorded: an unsigned 423 could come from anyone who answers on the manager's address.
    /// Forgets the biometric factor of `idmIdentifier`, which the manager removed because the fingers changed.
    func dropBiometricFactor(of idmIdentifier: String) throws {
        try update { contents in
            guard let index = contents.entries.firstIndex(where: { $0.idmIdentifier == idmIdentifier }) else { return }
            contents.entries[index].addedFactors?.removeAll { $0 == .biometric }
            contents.entries[index].biometricEnrolment = nil
        }
    }

    func recordLockout(activationId: String, _ lock: LockoutAttemptInformation?) throws {
        // A login that succeeds has nothing to forget most of the time; it then writes nothing.
        if lock == nil, try read().pendingLockouts[activationId] == nil { return }
        try update { contents in
            contents.pendingLockouts[activationId] = lock.map {
                PendingLockoutRecord(
                    isPermanent: $0.isPermanent, lockedUntil: $0.lockedUntil.millisecondsSince1970,
                    failedAttempts: $0.failedAttempts)
            }
        }
    }
}

/// The contents last read and the file they came from. A login asks for its enrolment, its offline record and its
/// host, and the file is decoded once while it stays the same file: every write replaces it (a new inode), and a
/// change in place would change its size or times.
final class LastRead: Sendable {
    private let kept = Mutex<(identity: FileIdentity, contents: IdentityManagerStore.Contents)?>(nil)
    /// How often the file was decoded, for tests.
    let decodes = Atomic<Int>(0)

    func contents(of identity: FileIdentity) -> IdentityManagerStore.Contents? {
        kept.withLock { $0?.identity == identity ? $0?.contents : nil }
    }

    func keep(_ contents: IdentityManagerStore.Contents, of identity: FileIdentity) {
        decodes.add(1, ordering: .relaxed)
        kept.withLock { $0 = (identity, contents) }
    }

    func forget() { kept.withLock { $0 = nil } }
}

/// Which file a path names now, and the size and times it has.
struct FileIdentity: Equatable, Sendable {
    let device: UInt64, inode: UInt64, size: Int64
    let modified: Int, modifiedNanoseconds: Int, changed: Int, changedNanoseconds: Int

    init?(of path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        (device, inode, size) = (UInt64(info.st_dev), UInt64(info.st_ino), Int64(info.st_size))
        (modified, modifiedNanoseconds) = (info.st_mtim.tv_sec, info.st_mtim.tv_nsec)
        (changed, changedNanoseconds) = (info.st_ctim.tv_sec, info.st_ctim.tv_nsec)
    }
}
