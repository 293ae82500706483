import Hummingbird
import HummingbirdCore
import Metrics
import NIOConcurrencyHelpers
import NIOCore
import Prometheus
import ServiceLifecycle

/// What the manager counts, through swift-metrics. Without `metrics.listen` no backend is bootstrapped and
/// these cost nothing; with it, `MetricsServer` exports them with the HTTP latencies in the Prometheus format.
enum ManagerMetrics {
    enum LoginResult: String {
        case success
        case wrongPIN = "wrong_pin"
        /// Refused unchecked: a lockout was in force.
        case locked
    }

    static func login(_ result: LoginResult) {
        Counter(label: "xign_logins_total", dimensions: [("result", result.rawValue)]).increment()
    }

    static func lockout() { Counter(label: "xign_lockouts_total").increment() }
}

/// GET /metrics on its own address, so the API's port never exposes it.
enum MetricsServer {
    /// Bootstraps swift-metrics (once per process) and builds the exporter, with the API's connection limits and deadlines.
    static func make(
        manager: IdentityManager, host: String, port: Int, http1: HTTP1Channel.Configuration
    ) -> some Service {
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: registry))
        let pending = Gauge(label: "xign_confirmations_pending")
        let statements = CountedTotal(label: "xign_database_statements_total")
        let syncedCommits = CountedTotal(label: "xign_database_synced_commits_total")
        let router = Router()
        router.get("/metrics") { _, _ -> Response in
            pending.record(try await manager.pendingConfirmationCount())
            statements.catchUp(with: manager.database.statements.total)
            syncedCommits.catchUp(with: manager.database.statements.syncedCommits)
            var text = [UInt8]()
            text.reserveCapacity(16 * 1024)
            registry.emit(into: &text)
            return Response(
                status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
                body: .init(byteBuffer: ByteBuffer(bytes: text)))
        }
        return Application(
            router: router, server: .http1(configuration: http1),
            configuration: .init(address: .hostname(host, port: port), serverName: nil),
            onServerRunning: { channel in
                manager.logger.notice(
                    "metrics at http://\(host.contains(":") ? "[\(host)]" : host):\(channel.localAddress?.port ?? port)/metrics"
                )
            },
            logger: manager.logger
        )
    }
}

/// A Prometheus counter that follows a total kept elsewhere (the database's own counts), brought up to it at each scrape.
private struct CountedTotal: Sendable {
    let counter: Metrics.Counter
    let counted = NIOLockedValueBox(0)

    init(label: String) { counter = Counter(label: label) }

    func catchUp(with total: Int) {
        let uncounted = counted.withLockedValue { counted in
            defer { counted = total }
            return total - counted
        }
        counter.increment(by: uncounted)
    }
}

extension ManagerMetrics {
    /// Runs `body`, counting a refusal because a lock is in force as a login refused `locked`.
    static func countingLockedLogins<T>(_ body: () async throws -> T) async throws -> T {
        do { return try await body() } catch let error as ManagerError where error.detail.code == .lockedOut {
            login(.locked)
            throw error
        }
    }
}
