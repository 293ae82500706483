import Foundation
import Logging
import NIOPosix
import XignCrypto
import XignManagerConfiguration
import XignProtocol

/// The PIN check with the lockout (docs/design.md, invariants 5 and 6), shared by personalization and authentication.
///
/// PIN checks of one activation run one at a time, and each result is written before the next check starts,
/// so parallel guesses cannot outrun the counter and a right PIN never sees another attempt's pending charge
/// as a lock. The claim lives in the database (`pin_check_until`), so it holds across manager instances; a
/// claim that ran out without a result (a crash during the hash) is charged as a failure. Within one process a
/// per-activation FIFO lock queues the waiters, so only other instances ever poll. Checks of different
/// activations never wait for each other: the slow hash runs on the thread pool, outside every transaction.
struct PINChecker: Sendable {
    let database: Database
    let configuration: ManagerConfiguration
    let secrets: ManagerSecrets
    let logger: Logger
    /// Names this instance's claims; the same across restarts.
    let instanceId: String
    /// Queues this process's checks per activation.
    let queue = KeyedAsyncLock()

    struct Verdict: Sendable {
        var activation: ManagerStore.ActivationRecord
        /// nil when the PIN was right; else the lock this wrong PIN caused.
        var lockout: LockoutMessage?
    }

    /// How long a claim holds; far above the hash's cost, so it only runs out when a manager died mid-check.
    static let claimMilliseconds: Int64 = 30_000
    /// How long a check waits for another instance's claim before it answers "busy": well inside a client's 10 s, so
    /// the client hears busy rather than nothing.
    static let waitMilliseconds: Int64 = 5_000

    /// What a wrong PIN's audit entry says about the attempt.
    struct Purpose: Sendable {
        var service: String
        var host: String?
        var actor: String
    }

    /// What a right PIN lets the caller write in the transaction of the verdict: one commit for both, where two
    /// would cost the disk twice. If it cannot commit, neither does the verdict, and its claim is charged at the
    /// next check, as a check cut off would be.
    typealias WhenRight = @Sendable (ManagerStore) async throws -> Void

    /// Checks `pin` against an activation. While a lock is in force the PIN is not checked at all (423).
    /// `admit` sees the activation (nil if unknown) inside the claiming transaction and throws to refuse it.
    func check(
        _ pin: String, activationId: String, for purpose: Purpose, whenRight: WhenRight? = nil,
        admit: @escaping @Sendable (ManagerStore.ActivationRecord?) throws -> ManagerStore.ActivationRecord
    ) async throws -> Verdict {
        try await queue.withLock(activationId) {
            let activation = try await claimPINCheck(activationId: activationId, admit: admit)
            return try await settlePINCheck(pin, activation: activation, for: purpose, whenRight: whenRight)
        }
    }

    /// The PIN a device gave, charged to its activation's lockout; refused when the device no longer holds it.
    func check(
        _ pin: String, ofDevice deviceId: String, activationId: String, for purpose: Purpose,
        whenRight: WhenRight? = nil
    ) async throws -> Verdict {
        try await check(pin, activationId: activationId, for: purpose, whenRight: whenRight) { activation in
            guard let activation, activation.deviceId == deviceId else {
                throw ManagerError(
                    .notFound, .deviceNotFound, "this device no longer holds its activation; personalize again")
            }
            return activation
        }
    }

    private enum Claim: Sendable {
        case claimed(ManagerStore.ActivationRecord)
        case locked(LockoutMessage)
        case heldElsewhere
        /// A claim that ran out unsettled must be charged first, in a synced transaction.
        case chargeFirst
    }

    /// Waits for the activation's claim, charging a claim that ran out unsettled, and takes it.
    private func claimPINCheck(
        activationId: String,
        admit: @escaping @Sendable (ManagerStore.ActivationRecord?) throws -> ManagerStore.ActivationRecord
    ) async throws -> ManagerStore.ActivationRecord {
        let wait = RequestBudget.limit(.milliseconds(Self.waitMilliseconds)).components
        let deadline = IdentityManager.now() + wait.seconds * 1000 + wait.attoseconds / 1_000_000_000_000_000
        var pause: Int64 = 2
        // A claim alone need not wait for the disk: nothing is answered before the verdict, whose synced commit takes
        // the claim with it, and a claim lost in a power cut lost no answer either. A charge is an answer's cause, so a
        // claim that finds one to make runs again, synced.
        var durability = Database.Durability.syncedLater
        while true {
            let claim = try await database.transaction(durability: durability) { [durability] store -> Claim in
                var activation = try admit(try await store.activation(id: activationId))
                guard activation.state != .revoked else {
                    throw ManagerError(
                        .gone, .activationRevoked,
                        "this activation was removed; register again or ask for a new activation")
                }
                let now = IdentityManager.now()
                // This instance's own claim while this process holds the activation's queue: no check of ours runs,
                // so a verdict of ours failed to commit (the database went away mid-check). It is charged now rather
                // than blocking the activation until it runs out.
                let abandonedHere = activation.pinCheckBy == self.instanceId
                if activation.pinCheckUntil > now && !abandonedHere { return .heldElsewhere }
                if activation.pinCheckUntil != 0 {
                    guard self.database.syncs(durability) else { return .chargeFirst }
                    // A check started and never reported: count it, as the guess it may have been.
                    let lock = try await self.chargeFailure(activation.id, after: activation.failedAttempts, in: store)
                    (activation.failedAttempts, activation.lockedUntil, activation.permanentlyLocked) = (
                        lock.failedAttempts, lock.lockedUntil, lock.isPermanent
                    )
                    self.logger.warning(
                        "a PIN check ran out without a result; counted as a failure",
                        metadata: ["activation": "\(activation.id)"])
                }
                // A lock refuses the attempt before its PIN is looked at; the answer commits with the charge above.
                if let lock = activation.pendingLock { return .locked(lock) }
                try await store.claimPINCheck(
                    activationId: activation.id, until: now + Self.claimMilliseconds, by: self.instanceId)
                return .claimed(activation)
            }
            switch claim {
            case .claimed(let activation):
                return activation
            case .locked(let lock):
                throw ManagerError.lockedOut(lock)
            case .chargeFirst:
                durability = .synced
            case .heldElsewhere:
                guard IdentityManager.now() < deadline else {
                    throw ManagerError(
                        .serviceUnavailable, .busy,
                        "another PIN check of this activation is still running; try again in a moment")
                }
                try await Task.sleep(for: .milliseconds(pause))
                pause = min(pause * 2, 50)
            }
        }
    }

    /// Called by `serve` before it answers: a claim this instance holds (its id is kept in the state directory) was
    /// left by its predecessor, killed mid-check, and is charged now, as the guess it may have been, instead of
    /// blocking its activation until the claim runs out. On SQLite, where one `serve` checks PINs, every claim is
    /// such a one. Claims of other instances run out as before. Returns the count.
    @discardableResult
    func settleAbandonedChecks() async throws -> Int {
        let owner = configuration.postgreSQL == nil ? nil : instanceId
        return try await database.transaction { store in
            let abandoned = try await store.activationsWithPINCheckClaims(by: owner)
            for activation in abandoned {
                _ = try await self.chargeFailure(activation.id, after: activation.failedAttempts, in: store)
                self.logger.warning(
                    "a PIN check was cut off by a restart; counted as a failure",
                    metadata: ["activation": "\(activation.id)"])
            }
            return abandoned.count
        }
    }

    /// After a verdict that may not have committed (the database went away, as in a failover): this instance's claim
    /// is charged as soon as the database answers again, as the guess it may have been, so that no other instance
    /// waits for it to run out. A verdict that did commit took the claim with it, and nothing is charged.
    private func chargeWhenTheDatabaseAnswers(_ activationId: String) {
        Task {
            let deadline = IdentityManager.now() + Self.claimMilliseconds
            while IdentityManager.now() < deadline {
                do {
                    // In the activation's queue: no check of this process runs, so a claim of this instance is the lost
                    // one. Each try has a short budget of its own (not the request's, which it would inherit), so the
                    // queue is not held long while the database does not answer.
                    try await RequestBudget.$deadline.withValue(.now + .seconds(2)) {
                        try await queue.withLock(activationId) {
                            try await self.database.transaction { store in
                                guard let activation = try await store.activation(id: activationId),
                                    activation.pinCheckUntil != 0, activation.pinCheckBy == self.instanceId
                                else { return }
                                _ = try await self.chargeFailure(
                                    activation.id, after: activation.failedAttempts, in: store)
                                self.logger.warning(
                                    "a PIN check whose verdict was lost is counted as a failure",
                                    metadata: ["activation": "\(activation.id)"])
                            }
                        }
                    }
                    return
                } catch {
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
    }

    /// Charges one failed (or cut-off) PIN check to an activation that had `failures` so far; returns the lock it causes.
    private func chargeFailure(
        _ activationId: String, after failures: Int, in store: ManagerStore
    ) async throws -> LockoutMessage {
        let lock = configuration.lockout.lock(afterFailures: failures + 1, now: IdentityManager.now())
        try await store.recordPINFailure(lock, activationId: activationId)
        return lock
    }

    /// The audit of a wrong PIN, and of the lock it caused. `at` is when it was typed (an offline PIN: on the device's
    /// clock); `cause` says what kind of PIN it was.
    static func auditWrongPIN(
        _ lock: LockoutMessage, of activation: ManagerStore.ActivationRecord, for purpose: Purpose,
        at: Int64? = nil,
        cause: String = "wrong PIN", in store: ManagerStore
    ) async throws {
        let now = IdentityManager.now()
        var event = AuditEvent(
            at: at ?? now, event: .loginFailure, email: activation.email, activationId: activation.id,
            host: purpose.host,
            service: purpose.service, detail: "\(cause), \(lock.failedAttempts) in a row", actor: purpose.actor)
        try await store.recordAudit(event)
        if lock.isPermanent || lock.lockedUntil > now {
            event.at = now
            event.event = .lockout
            event.detail =
                lock.isPermanent
                ? "locked until an administrator unlocks it" : "locked for \((lock.lockedUntil - now + 999) / 1000) s"
            try await store.recordAudit(event)
        }
    }

    /// Hashes the PIN off the async executors, then writes the verdict and gives the claim back in one statement.
    private func settlePINCheck(
        _ pin: String, activation: ManagerStore.ActivationRecord, for purpose: Purpose, whenRight: WhenRight?
    ) async throws -> Verdict {
        guard let salt = Base64URL.decode(activation.pinSalt), let stored = Base64URL.decode(activation.pinVerifier)
        else {
            throw ManagerError.internalFailure("stored PIN verifier of activation \(activation.id) is corrupt")
        }
        let presented: Data
        // A right PIN under an old cost or pepper gets a verifier made the current way, written with the verdict.
        let upgrade: PINVerifier?
        do {
            (presented, upgrade) = try await NIOThreadPool.singleton.runIfActive {
                let presented = try self.secrets.pinVerifier(
                    pin: pin, salt: salt, iterations: activation.pinIterations, pepper: activation.pinPepper)
                let isCurrent =
                    activation.pinIterations == self.configuration.pinHashIterations
                    && activation.pinPepper == self.secrets.pepperKind
                guard !isCurrent, constantTimeEquals(presented, stored) else { return (presented, nil) }
                return (presented, try self.makeVerifier(pin: pin))
            }
        } catch {
            // Nothing was compared, so nothing is charged. (A verdict that fails to commit below keeps the claim,
            // which the next check then charges: the guess may have been wrong.)
            try? await database.transaction { store in try await store.releasePINCheck(activationId: activation.id) }
            throw error
        }
        let commitVerdict = { @Sendable (whenRight: WhenRight?) in
            try await self.database.transaction { store -> Verdict? in
                // A PIN change that committed during the hash (its claim check raced this one on another instance):
                // this PIN was compared with a verifier that is gone, so it is neither right nor wrong now.
                let changed = { @Sendable () async throws -> Verdict? in
                    try await store.releasePINCheck(activationId: activation.id)
                    return nil
                }
                guard constantTimeEquals(presented, stored) else {
                    let current = try await store.activation(id: activation.id)
                    guard current?.pinVerifier == activation.pinVerifier else { return try await changed() }
                    // Counted from the row as it is now, not as the claim read it: a charge made meanwhile (a claim
                    // another instance took over because clocks disagree) is added to, never overwritten.
                    let failures = current?.failedAttempts ?? activation.failedAttempts
                    let lock = try await self.chargeFailure(activation.id, after: failures, in: store)
                    try await Self.auditWrongPIN(lock, of: activation, for: purpose, in: store)
                    self.logger.notice(
                        "wrong PIN",
                        metadata: [
                            "activation": "\(activation.id)", "failures": "\(lock.failedAttempts)",
                            "permanent": "\(lock.isPermanent)",
                        ])
                    return Verdict(activation: activation, lockout: lock)
                }
                // The right PIN clears the lock only where the verifier is still the one it matched.
                guard try await store.clearLockout(activationId: activation.id, verifier: activation.pinVerifier) else {
                    return try await changed()
                }
                if let upgrade {
                    try await store.replacePINVerifier(
                        activationId: activation.id, checked: activation.pinVerifier, with: upgrade)
                }
                try await whenRight?(store)
                return Verdict(activation: activation, lockout: nil)
            }
        }
        let settled: Verdict?
        do {
            settled = try await commitVerdict(whenRight)
        } catch  where whenRight != nil && constantTimeEquals(presented, stored) {
            // The caller's writes failed, maybe not the verdict's: a right PIN is settled alone, so it is not charged
            // at the next check. If that fails too, the claim stays and is charged, as for any verdict lost.
            do { _ = try await commitVerdict(nil) } catch { chargeWhenTheDatabaseAnswers(activation.id) }
            throw error
        } catch let error where !(error is ManagerError) {
            chargeWhenTheDatabaseAnswers(activation.id)
            throw error
        }
        guard let verdict = settled else {
            throw ManagerError(
                .conflict, .sessionInvalid,
                "the PIN was changed while this one was checked; start again with the current PIN")
        }
        if let lock = verdict.lockout, lock.isPermanent || lock.lockedUntil > IdentityManager.now() {
            ManagerMetrics.lockout()
        }
        return verdict
    }

    /// A fresh salt and verifier at the configured cost and pepper.
    func makeVerifier(pin: String) throws -> PINVerifier {
        let salt = try SecureRandom.bytes(16)
        let (iterations, pepper) = (configuration.pinHashIterations, secrets.pepperKind)
        return PINVerifier(
            salt: salt, value: try secrets.pinVerifier(pin: pin, salt: salt, iterations: iterations, pepper: pepper),
            iterations: iterations, pepper: pepper)
    }
}

extension PINChecker {
    /// The PIN inside `sealed`, which must have been made for this manager's sealing key and for `binding`.
    func open(_ sealed: SealedPINMessage, for binding: PINBinding) throws -> String {
        guard let pin = sealed.open(with: secrets.pinSealingKey, for: binding) else {
            throw ManagerError(
                .badRequest, .badRequest,
                "the sealed PIN does not open with this manager's PIN-sealing key for this request: the client pinned another manager, sealed to the signing key as clients before this manager did (update xign there), or the request was changed on the way"
            )
        }
        return pin
    }

    /// The id in `directory`/instance-id, created at first start.
    static func instanceId(in directory: String) throws -> String {
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
}
