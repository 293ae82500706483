import NIOCore

/// Runs a task's jobs on one NIO event loop. A PostgreSQL transaction prefers the loop of its connection, so each
/// statement is written and its answer resumes the transaction on the same thread: without it every statement
/// crossed to the loop and back to the global executor, two thread wake-ups that cost more CPU than PostgreSQL spent.
final class EventLoopTaskExecutor: TaskExecutor, @unchecked Sendable {
    private let eventLoop: any EventLoop

    init(_ eventLoop: any EventLoop) { self.eventLoop = eventLoop }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        eventLoop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
