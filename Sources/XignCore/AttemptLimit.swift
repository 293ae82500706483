import FoundationEssentials
import XignProtocol

/// A limit on PIN checks per key, on top of the manager's lockout: a few at once, then one per `refillSeconds`; a
/// correct PIN gives the full allowance back. xignd keys it by the target's uid, the module in a setuid host by the
/// caller and the target. Each change is a locked read-modify-write of one file (atomically, 0600), so neither a
/// restart, a crash nor a second process hands out a fresh allowance. Counted on the wall clock, which is what
/// survives a reboot; a clock set back refills nothing until it has caught up.
public struct AttemptLimit: Sendable {
    struct Allowance: Codable, Equatable {
        var attempts: Double
        var updatedAt: Double
    }

    /// Whether this attempt may go on, or how long the caller must wait.
    public enum Verdict: Equatable, Sendable {
        case allowed
        case refused(retryAfterSeconds: Int)
    }

    public let path: String
    let capacity: Double
    let refillSeconds: Double

    public init(path: String, capacity: Int = 5, refillSeconds: Int = 30) {
        self.path = path
        self.capacity = Double(capacity)
        self.refillSeconds = Double(refillSeconds)
    }

    /// Reads the file once, so a damaged one is found before anyone is refused for it.
    public func check() throws { _ = try read() }

    /// Takes one attempt for `key`, or says how long until the next one.
    public func charge(_ key: String) throws -> Verdict {
        try update { allowances in
            let time = Date().timeIntervalSince1970
            var allowance = current(allowances[key], at: time)
            guard allowance.attempts >= 1 else {
                return .refused(retryAfterSeconds: Int(((1 - allowance.attempts) * refillSeconds).rounded(.up)))
            }
            allowance.attempts -= 1
            allowances[key] = allowance
            return .allowed
        }
    }

    /// A correct PIN: the full allowance again.
    public func reset(_ key: String) throws {
        try update { allowances in allowances[key] = nil }
    }

    private func current(_ stored: Allowance?, at time: Double) -> Allowance {
        guard var allowance = stored else { return Allowance(attempts: capacity, updatedAt: time) }
        if time > allowance.updatedAt {
            allowance.attempts = min(capacity, allowance.attempts + (time - allowance.updatedAt) / refillSeconds)
            allowance.updatedAt = time
        }
        return allowance
    }

    private func read() throws -> [String: Allowance] {
        guard let data = try AtomicFile.read(path, limit: 1 << 20) else { return [:] }
        do { return try JSONDecoder().decode([String: Allowance].self, from: data) } catch {
            throw XignSdkError(.stateUnavailable, "\(path) is damaged (\(error)); move it aside")
        }
    }

    private func update<T>(_ change: (inout [String: Allowance]) throws -> T) throws -> T {
        try AtomicFile.withExclusiveLock(path + ".lock") {
            var allowances = try read()
            let before = allowances
            let result = try change(&allowances)
            // Full allowances carry no information; dropping them keeps the file small.
            let time = Date().timeIntervalSince1970
            allowances = allowances.filter { _, allowance in
                allowance.attempts + max(0, time - allowance.updatedAt) / refillSeconds < capacity
            }
            if allowances != before {
                try AtomicFile.write(try JSONEncoder().encode(allowances), to: path, mode: 0o600)
            }
            return result
        }
    }
}
