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
