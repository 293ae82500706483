import Foundation

/// Runs `body(0)` … `body(count - 1)` on `count` threads at once and returns their results in order; rethrows the
/// first error. Threads, not tasks: the cooperative pool is as wide as the cores, which would queue blocking calls.
public func onThreads<T: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) throws -> T) throws -> [T] {
    let results = NSLock()
    nonisolated(unsafe) var collected = [Result<T, any Error>?](repeating: nil, count: count)
    let done = DispatchGroup()
    for index in 0..<count {
        done.enter()
        let thread = Thread {
            let result = Result { try body(index) }
            results.lock()
            collected[index] = result
            results.unlock()
            done.leave()
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
    done.wait()
    return try collected.map { try $0!.get() }
}

/// Runs `body` `count` times at once as child tasks, and returns the results in order; the first error is thrown.
/// Network calls of `API` wait on a thread of their own, so the children really overlap at the server.
public func inParallel<T: Sendable>(
    _ count: Int, _ body: @escaping @Sendable (Int) async throws -> T
) async throws -> [T] {
    try await withThrowingTaskGroup(of: (Int, T).self) { group in
        for index in 0..<count { group.addTask { (index, try await body(index)) } }
        var results = [T?](repeating: nil, count: count)
        for try await (index, result) in group { results[index] = result }
        return results.map { $0! }
    }
}

/// Runs the blocking `body` on a thread of its own and waits for it without holding one of Swift's concurrency
/// threads (there are as many as cores, and a test that blocks them stalls every other test's tasks).
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread { continuation.resume(with: Result { try body() }) }
        thread.stackSize = 1 << 20
        thread.start()
    }
}
