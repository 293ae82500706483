import Foundation

extension Thread {
    /// Runs `body` on a new thread; the answer is read with `value(timeout:)`.
    public static func detachedResult<T: Sendable>(_ body: @escaping @Sendable () throws -> T) -> PendingResult<T> {
        let pending = PendingResult<T>()
        Thread.detachNewThread { pending.finish(Result(catching: body)) }
        return pending
    }
}

/// The result of work on another thread, once it is there.
public final class PendingResult<T: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    private var result: Result<T, any Error>?

    public var isFinished: Bool { condition.withLock { result != nil } }

    func finish(_ value: Result<T, any Error>) {
        condition.withLock {
            result = value
            condition.broadcast()
        }
    }

    @discardableResult
    public func value(timeout: TimeInterval) throws -> T {
        let deadline = Date().addingTimeInterval(timeout)
        return try condition.withLock {
            while result == nil {
                guard condition.wait(until: deadline) else { throw TestFailure("no result within \(timeout) s") }
            }
            return try result!.get()
        }
    }
}
