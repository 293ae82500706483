import Foundation
import NIOConcurrencyHelpers

/// Wake-ups by key within this process, so a long poll answers as soon as its row changes here. Other manager
/// instances change rows too, so a waiter never relies on a signal alone: it pauses at most a short while and
/// reads the row again.
final class Signals: @unchecked Sendable {
    private let lock = NIOLock()
    private var waiters: [String: [UUID: CheckedContinuation<Void, Never>]] = [:]

    /// Returns when `key` is signalled or after `duration`, whichever comes first.
    func pause(_ key: String, upTo duration: Duration) async {
        let token = UUID()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            lock.withLock { waiters[key, default: [:]][token] = continuation }
            Task {
                try? await Task.sleep(for: duration)
                self.resume(key, token)
            }
        }
    }

    func signal(_ key: String) {
        let woken = lock.withLock { waiters.removeValue(forKey: key) }
        woken?.values.forEach { $0.resume() }
    }

    private func resume(_ key: String, _ token: UUID) {
        let continuation = lock.withLock { () -> CheckedContinuation<Void, Never>? in
            let found = waiters[key]?.removeValue(forKey: token)
            if waiters[key]?.isEmpty == true { waiters[key] = nil }
            return found
        }
        continuation?.resume()
    }
}
