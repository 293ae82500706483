import Foundation
import NIOConcurrencyHelpers

/// Wake-ups by key within this process, and the last reading of each key that long polls wait on.
///
/// A long poll reads its row once and then sleeps until the row's key is signalled: by this process when it changes
/// the row, by PostgreSQL's NOTIFY when another instance does, or by the sweep (IdentityManager+WakeUps) when a
/// notification was lost. A signal also forgets the kept reading, so a poll that comes again reads the row again
/// only when the row changed; until then it costs the database nothing.
final class Signals: @unchecked Sendable {
    private enum Reading {
        /// A read has begun; it may be kept only if no signal came since.
        case underway(UInt64)
        case kept(any Sendable, token: UInt64, until: Int64)
    }

    /// A reading, with the token that names it while it is kept.
    struct Kept<Value: Sendable>: Sendable {
        var value: Value
        var token: UInt64?
    }

    /// How long a waiter whose reading could not be kept pauses before it reads again.
    static let unkeptPause: Duration = .milliseconds(250)

    private let lock = NIOLock()
    private var waiters: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]
    private var readings: [String: Reading] = [:]
    private var nextToken: UInt64 = 0

    /// Returns when `key` is signalled or after `duration`, whichever comes first; at once when the reading
    /// `token` names is no longer kept (a signal came after it was read).
    func pause(_ key: String, upTo duration: Duration, whileKept token: UInt64?) async {
        let waiter = UUID()
        let limit = token == nil ? min(duration, Self.unkeptPause) : duration
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let current = lock.withLock { () -> Bool in
                if let token {
                    guard case .kept(_, token, _) = readings[key] else { return false }
                }
                waiters[key, default: [:]][waiter] = continuation
                return true
            }
            guard current else { return continuation.resume() }
            Task {
                try? await Task.sleep(for: limit)
                self.resume(key, waiter)
            }
        }
    }

    /// Wakes the waiters of `key` and forgets its kept reading.
    func signal(_ key: String) {
        let woken = lock.withLock { () -> [UUID: CheckedContinuation<Void, Never>]? in
            readings[key] = nil
            return waiters.removeValue(forKey: key)
        }
        woken?.values.forEach { $0.resume() }
    }

    /// The kept reading of `key`, or `read()`'s, which is kept until `until` unless `key` is signalled meanwhile.
    func reading<Value: Sendable>(
        of key: String, now: Int64, until: (Value) -> Int64, _ read: () async throws -> Value
    ) async throws -> Kept<Value> {
        let (found, token) = lock.withLock { () -> (Kept<Value>?, UInt64) in
            if case .kept(let value as Value, let token, let expiry) = readings[key], expiry > now {
                return (Kept(value: value, token: token), token)
            }
            nextToken += 1
            readings[key] = .underway(nextToken)
            return (nil, nextToken)
        }
        if let found { return found }
        let value: Value
        do { value = try await read() } catch {
            lock.withLock { if case .underway(token) = readings[key] { readings[key] = nil } }
            throw error
        }
        let expiry = until(value)
        let kept = lock.withLock { () -> Bool in
            guard case .underway(token) = readings[key] else { return false }
            readings[key] = expiry > now ? .kept(value, token: token, until: expiry) : nil
            return expiry > now
        }
        return Kept(value: value, token: kept ? token : nil)
    }

    /// Forgets readings kept past their time, so a poll nobody repeats does not hold memory.
    func forgetReadings(keptBefore now: Int64) {
        lock.withLock {
            readings = readings.filter {
                guard case .kept(_, _, let until) = $0.value else { return true }
                return until > now
            }
        }
    }

    var keptReadings: Int { lock.withLock { readings.count } }

    private func resume(_ key: String, _ token: UUID) {
        let continuation = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            let found = waiters[key]?.removeValue(forKey: token)
            if waiters[key]?.isEmpty == true { waiters[key] = nil }
            return found
        }
        continuation?.resume()
    }
}
