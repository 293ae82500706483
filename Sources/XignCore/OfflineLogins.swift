import FoundationEssentials
import XignCrypto
import XignDevice
import XignProtocol

/// What offline login can do for an enrolment now, as the login, `doctor` and `list` tell it.
public enum OfflineAvailability: Sendable, Equatable, CustomStringConvertible {
    case available(until: Date, wrongPINsLeft: Int)
    /// Never possible for this enrolment as things stand; the text says why.
    case notOffered(String)
    /// The grace since the last online login ran out.
    case expired(Date)
    /// As many wrong offline PINs as the manager allows were given since the last online login.
    case exhausted(maxFailures: Int)
    /// This machine's clock is before the last online login: a clock set back must not stretch the grace.
    case clockBehind(lastOnline: Date)
    /// The TPM's own Clock, which nobody sets back, says the grace is over.
    case tpmGraceOver
    /// The TPM's Clock is not safe: the machine lost power without a shutdown, and until the Clock passes the value it
    /// last saved (about 70 minutes of running) it may show less than it did, which would stretch the grace.
    case tpmClockUnsafe
    /// No verifier of the current kind yet (one made before an upgrade): the next online login makes one.
    case notReady
    /// The TPM would allow only this many more wrong PINs before its lockout, which other programs need too.
    case tpmTriesLow(left: Int)

    public var isAvailable: Bool { if case .available = self { true } else { false } }

    public var description: String {
        switch self {
        case .available(let until, let left):
            return "possible until \(until.localDescription), \(left) wrong PIN(s) left"
        case .notOffered(let why): return why
        case .expired(let at):
            return
                "ended \(at.localDescription), the grace after the last online login; connect to the network and log in once"
        case .exhausted(let maximum):
            return "ended after \(maximum) wrong offline PIN(s); connect to the network and log in once"
        case .clockBehind(let last):
            return
                "refused: this machine's clock is before the last online login (\(last.localDescription)); correct the clock, or connect to the network"
        case .tpmGraceOver:
            return
                "ended: the TPM's clock says the grace after the last online login is over; connect to the network and log in once"
        case .tpmClockUnsafe:
            return
                "refused for now: the machine lost power without shutting down, and the TPM trusts its own clock again only after about 70 minutes of running; connect to the network, or wait"
        case .notReady:
            return "not ready on this machine yet; connect to the network and log in once"
        case .tpmTriesLow(let left):
            return
                "refused: the TPM allows only \(left) more wrong PIN(s) before its lockout, which other programs need too; connect to the network and log in once"
        }
    }

    /// What the login says before anyone is authenticated: no dates and no clock, which would tell whoever sits at
    /// the machine how far to set it.
    public var beforeAuthentication: String {
        switch self {
        case .exhausted, .notOffered, .available: return description
        default: return "is not possible now; connect to the network and log in once"
        }
    }
}

/// How an offline PIN check ended.
public enum OfflineCheck: Sendable, Equatable {
    case accepted(until: Date)
    case wrong(wrongPINsLeft: Int)
    case unavailable(OfflineAvailability)
}

/// One enrolment's offline login (docs/security.md, "Offline login"): the manager's policy from its last signed
/// answer, the TPM verifier of the PIN, and the offline events the manager has not acknowledged yet.
struct OfflineLoginRecord: Codable, Equatable {
    struct Verifier: Codable, Equatable {
        /// The file below the key directory (`TPMPINVerifierStore`).
        var reference: String
        /// The KDF's salt, base64url; new with every verifier.
        var salt: String
        /// The manager's PIN generation the PIN was checked under.
        var pinGeneration: Int64
        /// The TPM's Clock past which the verifier's policy refuses (milliseconds); nil for a verifier made before
        /// the grace was bound into the TPM, which is not used.
        var deadline: UInt64?
        /// The kind of TPM object: `current` binds every use, the ADMIN role's too, to the policy, which asks for a
        /// safe Clock. One of an older kind (nil) is not used, and the next online login replaces it.
        var kind: Int?

        static let current = 2
        var isCurrent: Bool { deadline != nil && kind == Self.current }
    }

    var policy: OfflinePolicyMessage?
    var verifier: Verifier?
    /// The last online login with the PIN, on this machine's clock (milliseconds since 1970).
    var lastOnlineAt: Int64 = 0
    /// Wrong offline PINs since then, each written before the TPM saw it.
    var failures = 0
    var events: [OfflineEventMessage] = []
    var droppedLogins = 0
    var lastSequence: Int64 = 0
    /// Per role, whether the manager last asked for nothing beyond the device and the PIN: offline login checks
    /// nothing else, so a role that needs more (a finger) is never logged in offline.
    var pinSuffices: [String: Bool]? = nil
}

/// Offline login for this machine's enrolments: the records in the state file, and the TPM verifiers they name.
/// Every change of a record is a locked read-modify-write of the state file, so parallel logins cannot lose a count.
public struct OfflineLogins {
    let store: IdentityManagerStore
    let verifiers: TPMPINVerifierStore
    let mode: ClientConfiguration.OfflineMode
    let lockoutPolicy: TPMLockoutPolicy

    /// Offline login stops while the TPM has this many wrong PINs left or fewer, so disk unlock and other
    /// PIN-protected objects of the machine keep a try.
    static let reservedTPMTries = 1

    /// The PIN becomes the verifier's authorization through PBKDF2 with the verifier's own salt. The TPM, not the
    /// cost, is what limits guessing; the KDF keeps the PIN itself out of the TPM.
    static func authorization(pin: String, salt: Data) throws -> Data {
        try PBKDF2.deriveKey(
            password: Data(pin.utf8), salt: Data("xign offline PIN verifier".utf8) + salt, iterations: 10_000)
    }

    /// How often a login that changes nothing else writes its time: the grace is days, so minutes do not matter.
    static let onlineTimeGranularity: Int64 = 600_000

    func record(_ entity: IdentityManagerEntity) throws -> OfflineLoginRecord? {
        try store.read().offline?[entity.idmIdentifier]
    }

    /// Changes the enrolment's record under the state file's lock; returns what `change` returns.
    private func update<T>(
        _ entity: IdentityManagerEntity, _ change: (inout OfflineLoginRecord) throws -> T
    ) throws -> T {
        try store.update { contents in
            var records = contents.offline ?? [:]
            var record = records[entity.idmIdentifier] ?? OfflineLoginRecord()
            let result = try change(&record)
            records[entity.idmIdentifier] = record
            contents.offline = records
            return result
        }
    }

    // MARK: Online: the manager's word

    /// What to send in the next start: the events the manager has not acknowledged.
    static func report(from record: OfflineLoginRecord?) -> OfflineReportMessage? {
        guard let record, !record.events.isEmpty || record.droppedLogins > 0 else { return nil }
        return OfflineReportMessage(events: record.events, droppedLogins: record.droppedLogins)
    }

    /// Takes the policy of a signed answer: events it acknowledges are dropped, and a verifier it no longer allows
    /// (offline off, another PIN generation, a manager without offline login) is deleted. `current` is the record as
    /// the caller read it, to see whether anything changes; the change itself reads it again under the lock.
    func apply(
        _ policy: OfflinePolicyMessage?, to entity: IdentityManagerEntity, readAs current: OfflineLoginRecord?
    ) throws {
        if current == nil && policy?.allowsOfflineLogin != true { return }
        // Most starts change nothing: then nothing is written.
        guard Self.applying(policy, to: current ?? OfflineLoginRecord(), mode: mode) != current else { return }
        let stale = try update(entity) { record -> String? in
            let verifier = record.verifier
            record = Self.applying(policy, to: record, mode: mode)
            return record.verifier == nil ? verifier?.reference : nil
        }
        if let stale { try? verifiers.delete(stale) }
    }

    static func applying(
        _ policy: OfflinePolicyMessage?, to record: OfflineLoginRecord, mode: ClientConfiguration.OfflineMode
    ) -> OfflineLoginRecord {
        var record = record
        record.policy = policy
        if let through = policy?.reportedThrough {
            let before = record.events.count
            record.events.removeAll { $0.sequence <= through }
            // The report the manager recorded carried the count of logins dropped before its events.
            if record.events.count < before || record.events.isEmpty { record.droppedLogins = 0 }
            record.lastSequence = max(record.lastSequence, through)
        }
        if let verifier = record.verifier,
            !(policy?.allowsOfflineLogin == true && policy?.pinGeneration == verifier.pinGeneration && mode == .auto)
        {
            record.verifier = nil
        }
        return record
    }

    /// After the manager accepted `pin` for `role` (a login, a personalization, a PIN change): the grace starts again,
    /// the count of wrong offline PINs is cleared, and the verifier is made anew when there is none for this PIN
    /// generation or its deadline on the TPM's Clock no longer matches the grace. A failure here never fails what
    /// succeeded; `doctor` shows an enrolment without a verifier, and why.
    func refresh(
        _ entity: IdentityManagerEntity, pin: String, role: (name: String, pinSuffices: Bool)? = nil, now: Date = Date()
    ) {
        try? refreshing(entity, pin: pin, role: role, now: now.millisecondsSince1970)
    }

    private func refreshing(
        _ entity: IdentityManagerEntity, pin: String, role: (name: String, pinSuffices: Bool)?, now: Int64
    ) throws {
        guard entity.keyKind == .tpm, mode == .auto, let record = try record(entity), let policy = record.policy,
            policy.allowsOfflineLogin
        else {
            return
        }
        let roleKnown = role.map { record.pinSuffices?[$0.name] == $0.pinSuffices } ?? true
        if record.verifier?.pinGeneration == policy.pinGeneration, record.verifier?.isCurrent == true, roleKnown,
            record.failures == 0,
            now - record.lastOnlineAt < Self.onlineTimeGranularity, now >= record.lastOnlineAt
        {
            return
        }
        var fresh: OfflineLoginRecord.Verifier?
        var dropped = false
        do {
            let standing = try self.standing()
            let current = record.verifier
            let wanted = standing.clock + UInt64(max(0, policy.graceMilliseconds))
            if current?.pinGeneration != policy.pinGeneration || current?.isCurrent != true
                || standing.unprotectedBecause != nil
                || current?.deadline.map({ max($0, wanted) - min($0, wanted) > UInt64(Self.onlineTimeGranularity) })
                    ?? true
            {
                let salt = try SecureRandom.bytes(16)
                let authorization = try Self.authorization(pin: pin, salt: salt)
                let made = try withTPM {
                    try verifiers.create(
                        authorization: authorization, beside: entity.keyReference,
                        graceMilliseconds: policy.graceMilliseconds, policy: lockoutPolicy)
                }
                fresh = .init(
                    reference: made.reference, salt: Base64URL.encode(salt), pinGeneration: policy.pinGeneration,
                    deadline: made.deadline, kind: OfflineLoginRecord.Verifier.current)
            }
        } catch TPMFailure.unprotected {
            // Root here could lift the count of wrong PINs: no verifier may stay.
            dropped = true
        }
        let replaced: String?
        do {
            replaced = try update(entity) { record -> String? in
                record.lastOnlineAt = now
                record.failures = 0
                if let role {
                    record.pinSuffices = (record.pinSuffices ?? [:]).merging([role.name: role.pinSuffices]) { $1 }
                }
                guard fresh != nil || dropped else { return nil }
                defer { record.verifier = fresh }
                return record.verifier?.reference
            }
        } catch {
            // A state that cannot be written (a full disk) names no new verifier: none is left behind.
            if let fresh { try? verifiers.delete(fresh.reference) }
            throw error
        }
        if let replaced { try? verifiers.delete(replaced) }
    }

    /// The enrolment is gone (removed here, or revoked at the manager): its verifier and record go too.
    func forget(_ entity: IdentityManagerEntity) throws {
        guard try record(entity) != nil else { return }
        let reference = try store.update { $0.dropOfflineRecord(of: entity.idmIdentifier) }
        if let reference { try? verifiers.delete(reference) }
    }

    // MARK: Offline: the TPM's word

    /// Whether offline login is possible for `role` (any role when nil): the manager's policy, the count and grace on
    /// this machine's clock, then the TPM's own word (its Clock, its tries left, and whether root could lift its count).
    public func availability(
        of entity: IdentityManagerEntity, role: String? = nil, now: Date = Date()
    ) throws -> OfflineAvailability {
        let record = try record(entity)
        let availability = Self.availability(
            of: record, entity: entity, role: role, mode: mode, now: now.millisecondsSince1970)
        switch availability {
        case .available:
            guard let deadline = record?.verifier?.deadline else { return availability }
            return Self.judged(availability, by: try standing(), deadline: deadline)
        case .notOffered, .notReady:
            // Say why no verifier was made when it is the TPM's doing.
            guard entity.keyKind == .tpm, mode == .auto, record?.policy?.allowsOfflineLogin == true,
                let why = try? standing().unprotectedBecause
            else { return availability }
            return .notOffered("not offered: \(why)")
        default:
            return availability
        }
    }

    /// One TPM conversation at a time: a TPM without a resource manager in front (swtpm, /dev/tpm0) has room for a
    /// few objects only, and parallel logins would fill it.
    private func withTPM<T>(_ body: () throws -> T) throws -> T {
        try AtomicFile.withExclusiveLock("\(store.directory)/.tpm.lock", body)
    }

    private func standing() throws -> TPMStanding { try withTPM { try verifiers.standing(policy: lockoutPolicy) } }

    static func judged(
        _ availability: OfflineAvailability, by tpm: TPMStanding, deadline: UInt64
    ) -> OfflineAvailability {
        if let why = tpm.unprotectedBecause { return .notOffered("not offered: \(why)") }
        guard tpm.clock < deadline else { return .tpmGraceOver }
        guard tpm.clockSafe else { return .tpmClockUnsafe }
        let left = tpm.lockout.maxTries - tpm.lockout.failures
        guard left > reservedTPMTries, !tpm.lockout.isLockedOut else { return .tpmTriesLow(left: max(0, left)) }
        return availability
    }

    static func availability(
        of record: OfflineLoginRecord?, entity: IdentityManagerEntity, role: String? = nil,
        mode: ClientConfiguration.OfflineMode, now: Int64
    )
        -> OfflineAvailability
    {
        guard entity.keyKind == .tpm else {
            return .notOffered("not offered: the device key is not in a TPM, which offline login needs")
        }
        guard mode == .auto else { return .notOffered("off on this machine (offline = never in xign.conf)") }
        guard let record, let policy = record.policy, policy.allowsOfflineLogin else {
            return .notOffered("not allowed by the manager for this account")
        }
        guard record.verifier?.isCurrent == true else { return .notReady }
        if let role, record.pinSuffices?[role] != true {
            return .notOffered(
                record.pinSuffices?[role] == false
                    ? "not offered for role \(role): it needs more than the PIN, which offline login cannot check"
                    : "not ready for role \(role): log in with it once while the manager can be reached")
        }
        let until = record.lastOnlineAt + policy.graceMilliseconds
        guard now + 300_000 >= record.lastOnlineAt else {
            return .clockBehind(lastOnline: Date(millisecondsSince1970: record.lastOnlineAt))
        }
        guard now < until else { return .expired(Date(millisecondsSince1970: until)) }
        guard record.failures < policy.maxFailures else { return .exhausted(maxFailures: policy.maxFailures) }
        return .available(
            until: Date(millisecondsSince1970: until), wrongPINsLeft: policy.maxFailures - record.failures)
    }

    /// Checks `pin` with the TPM. The attempt is written as a wrong PIN before the TPM sees it, so a crash or a pulled
    /// plug counts it; a right PIN then turns it into a login, and a TPM that could not be asked takes it back.
    public func check(
        pin: String, of entity: IdentityManagerEntity, service: String, role: String? = nil, now: Date = Date()
    ) throws -> OfflineCheck {
        let at = now.millisecondsSince1970
        let service = String(LogText.field(service, maximumLength: 64))
        let mode = self.mode
        let attempt = try update(entity) { record -> (OfflineLoginRecord.Verifier, Int64)? in
            guard case .available = Self.availability(of: record, entity: entity, role: role, mode: mode, now: at),
                let verifier = record.verifier
            else {
                return nil
            }
            record.failures += 1
            record.lastSequence += 1
            if record.events.count >= OfflineReportMessage.maximumEvents,
                let oldest = record.events.firstIndex(where: { $0.kind == .login })
            {
                record.events.remove(at: oldest)
                record.droppedLogins += 1
            }
            record.events.append(
                OfflineEventMessage(sequence: record.lastSequence, at: at, kind: .wrongPIN, service: service))
            return (verifier, record.lastSequence)
        }
        guard let (verifier, sequence) = attempt else {
            return .unavailable(try availability(of: entity, role: role, now: now))
        }
        let accepted: Bool
        do {
            guard let salt = Base64URL.decode(verifier.salt) else {
                throw TPMFailure.keyDoesNotLoad("the verifier's salt is damaged")
            }
            let authorization = try Self.authorization(pin: pin, salt: salt)
            accepted = try withTPM {
                try verifiers.check(verifier.reference, authorization: authorization, deadline: verifier.deadline ?? 0)
            }
        } catch {
            // The TPM did not judge this PIN (past its grace, in lockout, unreachable, another TPM): nothing is counted.
            try update(entity) { record in
                record.failures -= 1
                record.events.removeAll { $0.sequence == sequence }
            }
            switch error as? TPMFailure {
            case .graceOver: return .unavailable(.tpmGraceOver)
            case .clockUnsafe: return .unavailable(.tpmClockUnsafe)
            case .oldVerifier: return .unavailable(.notReady)
            default: break
            }
            throw DeviceKeys.error(error, doing: "cannot check the PIN offline")
        }
        let record = try update(entity) { record -> OfflineLoginRecord in
            if accepted {
                record.failures -= 1
                if let index = record.events.firstIndex(where: { $0.sequence == sequence }) {
                    record.events[index].kind = .login
                }
            }
            return record
        }
        guard accepted else {
            return .wrong(wrongPINsLeft: max(0, (record.policy?.maxFailures ?? 0) - record.failures))
        }
        return .accepted(
            until: Date(millisecondsSince1970: record.lastOnlineAt + (record.policy?.graceMilliseconds ?? 0)))
    }
}

extension XignSdk {
    public var offlineLogins: OfflineLogins {
        OfflineLogins(
            store: store, verifiers: keys.pinVerifiers, mode: configuration.offline,
            lockoutPolicy: configuration.tpmLockout)
    }
}

extension DeviceKeys {
    var pinVerifiers: TPMPINVerifierStore { TPMPINVerifierStore(directory: tpm.directory, tcti: tpm.tcti) }
}
