import Foundation
import Testing

/// Lets at most as many of the marked tests run at once as the machine has cores, each on a thread of its own. A
/// synchronous test holds one of Swift's concurrency threads (as many as cores) while it waits for a manager process,
/// which kept the suite's parallelism at the core count; an `async` test gives its thread back while it waits, so
/// without this every test of a suite would start its processes at once, and the ones that count a manager's commits
/// or time a 300 ms lock would measure the load instead. The thread of its own keeps what such a test does
/// synchronously (a `psql`, a `waitUntil`) off the shared threads, and the shared threads' queue out of its timings.
public struct MachineShare: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> MachineShare? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await Self.slots.holding { try await onThreadOfItsOwn { try await function() } }
    }

    private static let slots = Permits(count: ProcessInfo.processInfo.activeProcessorCount)
}

/// At most `count` holders at once; the others wait their turn, first come first served.
public actor Permits {
    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    public init(count: Int) { free = max(1, count) }

    public func acquire() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    public func release() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }

    /// Runs `body` while holding a permit.
    public nonisolated func holding<T>(_ body: () async throws -> T) async throws -> T {
        await acquire()
        do {
            let result = try await body()
            await release()
            return result
        } catch {
            await release()
            throw error
        }
    }
}

/// Runs `body` on a thread of its own (its child tasks too), one of a pool that grows as needed. A test that runs
/// on Swift's shared threads waits for one of them after each suspension, and under `make test` synchronous tests
/// of other suites hold them for seconds: a 300 ms lock would run out between two requests.
public func onThreadOfItsOwn<T>(_ body: () async throws -> T) async throws -> T {
    let executor = ThreadExecutor.take()
    defer { ThreadExecutor.giveBack(executor) }
    return try await withTaskExecutorPreference(executor, operation: body)
}

/// Runs jobs one after another on a thread that lives as long as the test process.
private final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    private var jobs: [UnownedJob] = []

    private static let idleLock = NSLock()
    nonisolated(unsafe) private static var idle: [ThreadExecutor] = []

    static func take() -> ThreadExecutor { idleLock.withLock { idle.popLast() } ?? ThreadExecutor() }

    static func giveBack(_ executor: ThreadExecutor) { idleLock.withLock { idle.append(executor) } }

    init() {
        let thread = Thread { [unowned self] in run() }
        thread.stackSize = 4 << 20
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.withLock {
            jobs.append(job)
            condition.signal()
        }
    }

    private func run() {
        while true {
            let job = condition.withLock {
                while jobs.isEmpty { condition.wait() }
                return jobs.removeFirst()
            }
            job.runSynchronously(on: asUnownedTaskExecutor())
        }
    }
}

extension Trait where Self == MachineShare {
    /// Runs the suite's tests at most a core's worth at a time, beside every other test marked so.
    public static var machineShare: Self { MachineShare() }
}
