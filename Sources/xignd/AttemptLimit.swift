import Foundation
import XignProtocol

/// xignd's own limit on PIN checks, per target uid, on top of the manager's lockout: a few at once, then one per
/// `refillSeconds`. A correct PIN gives the full allowance back. It is written to disk on every change (atomically,
/// 0600), so neither a restart nor a crash hands out a fresh allowance. Counted on the wall clock, which is what
/// survives a reboot; a clock set back refills nothing until it has caught up.
final class AttemptLimit: @unchecked Sendable {
    struct Allowance: Codable, Equatable {
        var attempts: Double
        var updatedAt: Double
    }

    enum Verdict: Equatable {
        case allowed
        case refused(retryAfterSeconds: Int)
    }

    let path: String
    let capacity: Double
    let refillSeconds: Double
    private let lock = NSLock()
    private var allowances: [String: Allowance]

    init(path: String, capacity: Int = 5, refillSeconds: Int = 30) throws {
        self.path = path
        self.capacity = Double(capacity)
        self.refillSeconds = Double(refillSeconds)
        guard let data = try AtomicFile.read(path, limit: 1 << 20) else {
            allowances = [:]
            return
        }
        do { allowances = try JSONDecoder().decode([String: Allowance].self, from: data) } catch {
            throw XigndError("\(path) is damaged (\(error)); move it aside and start xignd again")
        }
    }

    /// Takes one attempt for `uid`, or says how long until the next one.
    func charge(_ uid: UInt32) throws -> Verdict {
        try lock.withLock {
            var allowance = current(uid)
            guard allowance.attempts >= 1 else {
                return .refused(retryAfterSeconds: Int(((1 - allowance.attempts) * refillSeconds).rounded(.up)))
            }
            allowance.attempts -= 1
            allowances[String(uid)] = allowance
            try save()
            return .allowed
        }
    }

    /// A correct PIN: the full allowance again.
    func reset(_ uid: UInt32) throws {
        try lock.withLock {
            guard allowances.removeValue(forKey: String(uid)) != nil else { return }
            try save()
        }
    }

    private func current(_ uid: UInt32) -> Allowance {
        let time = Date().timeIntervalSince1970
        guard var allowance = allowances[String(uid)] else { return Allowance(attempts: capacity, updatedAt: time) }
        if time > allowance.updatedAt {
            allowance.attempts = min(capacity, allowance.attempts + (time - allowance.updatedAt) / refillSeconds)
            allowance.updatedAt = time
        }
        return allowance
    }

    private func save() throws {
        // Full allowances carry no information; dropping them keeps the file small.
        let time = Date().timeIntervalSince1970
        allowances = allowances.filter { _, allowance in allowance.attempts + max(0, time - allowance.updatedAt) / refillSeconds < capacity }
        try AtomicFile.write(try JSONEncoder().encode(allowances), to: path, mode: 0o600)
    }
}

struct XigndError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
