/// What a login request may spend waiting, all its waits together (for a pooled connection, for another instance's
/// PIN check, for a call to end): 7 s, and a call's watchdog adds at most 2 s, inside a client's 10 s, so that in a
/// failover the client hears 503 busy rather than nothing.
/// Requests outside a budget (long polls) keep each wait's own bound.
enum RequestBudget {
    static let total: Duration = .seconds(7)
    @TaskLocal static var deadline: ContinuousClock.Instant?

    /// `body` with a budget that starts now.
    static func within<T: Sendable>(_ body: () async throws -> T) async throws -> T {
        try await $deadline.withValue(.now + total) { try await body() }
    }

    /// The shorter of `wait` and what is left of the budget; zero once it is spent.
    static func limit(_ wait: Duration) -> Duration {
        guard let deadline else { return wait }
        return max(.zero, min(wait, deadline - .now))
    }
}
