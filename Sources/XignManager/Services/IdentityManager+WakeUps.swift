import Foundation
import Logging
import NIOConcurrencyHelpers
import ServiceLifecycle

/// Waiting that costs nothing: a long poll reads its row once and sleeps until the row changes (Signals). A change
/// made here wakes it at once; one made by another instance arrives by PostgreSQL's NOTIFY; and a sweep of the rows
/// changed lately, one statement every few seconds, catches a notification that was lost (an instance that stopped
/// between its commit and its NOTIFY, a listening connection that broke). A lost wake-up costs seconds, never the
/// decision.
extension IdentityManager {
    /// How often the sweep reads the confirmations changed lately.
    static let sweepInterval: Duration = .seconds(5)
    /// How far back each sweep looks before the previous one: covers transactions that committed late and
    /// instances whose clocks differ by up to this much.
    static let sweepOverlapMilliseconds: Int64 = 30_000

}

/// Remembers which changes the sweep has already signalled, so each change wakes its waiters once.
final class ConfirmationSweep: Sendable {
    private let seen = NIOLockedValueBox<(through: Int64, changes: [String: Int64])>((0, [:]))

    /// Signals each confirmation changed since the previous sweep (less the overlap) that was not signalled yet.
    func run(_ manager: IdentityManager) async throws {
        let now = IdentityManager.now()
        let since = seen.withLockedValue {
            ($0.through == 0 ? now : $0.through) - IdentityManager.sweepOverlapMilliseconds
        }
        let changes = try await manager.database.read { store in try await store.confirmationsChanged(since: since) }
        let fresh = seen.withLockedValue { state -> [ManagerStore.ConfirmationChange] in
            let fresh = changes.filter { state.changes[$0.id] != $0.changedAt }
            for change in fresh { state.changes[change.id] = change.changedAt }
            state.changes = state.changes.filter { $0.value > since }
            state.through = now
            return fresh
        }
        for change in fresh {
            WakeUps.keys(confirmation: change.id, account: change.accountId).forEach(manager.wakeUps.signals.signal)
        }
        manager.wakeUps.signals.forgetReadings(keptBefore: now)
    }
}

/// Runs the sweep, and on PostgreSQL listens for the other instances' notifications.
struct WakeUpService: Service {
    let manager: IdentityManager

    func run() async throws {
        let sweep = ConfirmationSweep()
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask {
                    await manager.database.listen(logger: manager.logger) { manager.wakeUps.signals.signal($0) }
                }
                group.addTask {
                    while !Task.isCancelled {
                        do { try await sweep.run(manager) } catch is CancellationError { return } catch {
                            manager.logger.warning("cannot read the confirmations changed lately: \(error)")
                        }
                        try? await Task.sleep(for: IdentityManager.sweepInterval)
                    }
                }
            }
        }
    }
}
