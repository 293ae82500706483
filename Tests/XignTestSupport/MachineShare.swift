import Foundation
import Testing

/// Lets at most as many of the marked tests run at once as the machine has cores. A synchronous test holds one of
/// Swift's concurrency threads (as many as cores) while it waits for a manager process, which kept the suite's
/// parallelism at the core count; an `async` test gives its thread back while it waits, so without this every test
/// of a suite would start its processes at once, and the ones that count a manager's commits or time a 300 ms lock
/// would measure the load instead.
public struct MachineShare: SuiteTrait, TestTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func scopeProvider(for test: Test, testCase: Test.Case?) -> MachineShare? {
        testCase == nil ? nil : self
    }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        await Self.slots.acquire()
        do {
            try await function()
        } catch {
            await Self.slots.release()
            throw error
        }
        await Self.slots.release()
    }

    private static let slots = Slots(count: ProcessInfo.processInfo.activeProcessorCount)

    private actor Slots {
        private var free: Int
        private var waiting: [CheckedContinuation<Void, Never>] = []

        init(count: Int) { free = max(1, count) }

        func acquire() async {
            if free > 0 {
                free -= 1
                return
            }
            await withCheckedContinuation { waiting.append($0) }
        }

        func release() {
            if waiting.isEmpty {
                free += 1
            } else {
                waiting.removeFirst().resume()
            }
        }
    }
}

extension Trait where Self == MachineShare {
    /// Runs the suite's tests at most a core's worth at a time, beside every other test marked so.
    public static var machineShare: Self { MachineShare() }
}
