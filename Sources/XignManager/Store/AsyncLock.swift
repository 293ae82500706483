import NIOConcurrencyHelpers

/// A FIFO lock for async code. Actor isolation alone is not enough: an actor is re-entered at every await.
final class AsyncLock: @unchecked Sendable {
    private let mutex = NIOLock()
    private var locked = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func withLock<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        defer { release() }
        return try await body()
    }

    private func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let runNow = mutex.withLock { () -> Bool in
                if locked {
                    waiters.append(continuation)
                    return false
                }
                locked = true
                return true
            }
            if runNow { continuation.resume() }
        }
    }

    private func release() {
        let next = mutex.withLock { () -> CheckedContinuation<Void, Never>? in
            if waiters.isEmpty {
                locked = false
                return nil
            }
            return waiters.removeFirst()
        }
        next?.resume()
    }
}

/// FIFO locks by key: work for one key waits its turn while other keys run. An entry lives while it is used.
final class KeyedAsyncLock: @unchecked Sendable {
    private let mutex = NIOLock()
    private var locks: [String: (lock: AsyncLock, users: Int)] = [:]

    func withLock<T: Sendable>(_ key: String, _ body: () async throws -> T) async throws -> T {
        let lock = mutex.withLock { () -> AsyncLock in
            let entry = locks[key] ?? (AsyncLock(), 0)
            locks[key] = (entry.lock, entry.users + 1)
            return entry.lock
        }
        defer {
            mutex.withLock {
                if let entry = locks[key] { locks[key] = entry.users > 1 ? (entry.lock, entry.users - 1) : nil }
            }
        }
        return try await lock.withLock(body)
    }
}
