import Foundation
import XignCore
import XignLogin
import XignProtocol

/// Users on every machine, on a host: keeps the directory cache fresh (at start, then every `refreshMilliseconds`)
/// and answers the NSS module's misses on a socket of its own. A miss asks the manager at once, unless a fetch began
/// less than `missMilliseconds` ago, so a stream of unknown names (a scan of sshd) costs the manager one fetch per
/// interval. A failed fetch leaves the cache as it was: a host that cannot reach its manager keeps its users.
public final class DirectoryService: @unchecked Sendable {
    public typealias Fetch = @Sendable () throws -> [DirectoryUser]
    /// The socket's name in the cache's directory, where the module looks for it.
    public static let socketName = "socket"

    let cache: DirectoryCache
    let fetch: Fetch
    let refreshMilliseconds: Int64
    let missMilliseconds: Int64
    let maximumConnections: Int
    let log: @Sendable (Int32, String) -> Void

    private let state = NSCondition()
    private var names: Set<String> = []
    private var ids: Set<Int64> = []
    private var fetching = false
    private var fetchesDone = 0
    private var lastFetchStart: MonotonicClock.Instant?
    private var reported: [String] = []
    private var open = 0

    public init(
        cache: DirectoryCache, fetch: @escaping Fetch, refreshMilliseconds: Int64 = 300_000,
        missMilliseconds: Int64 = 10_000, maximumConnections: Int = 32,
        log: @escaping @Sendable (Int32, String) -> Void
    ) {
        self.cache = cache
        self.fetch = fetch
        self.refreshMilliseconds = refreshMilliseconds
        self.missMilliseconds = missMilliseconds
        self.maximumConnections = maximumConnections
        self.log = log
        let served = cache.served()
        names = Set(served.map(\.name))
        ids = Set(served.map(\.id))
    }

    /// Fetches now and then every `refreshMilliseconds`, on a thread of its own.
    public func startRefreshing() {
        Thread.detachNewThread { [self] in
            while true {
                refresh()
                usleep(UInt32(min(refreshMilliseconds, 3_600_000) * 1000))
            }
        }
    }

    /// One fetch and write; a caller that comes while one runs waits for it instead of starting another.
    func refresh() {
        state.lock()
        if fetching {
            let awaited = fetchesDone + 1
            while fetchesDone < awaited { state.wait() }
            state.unlock()
            return
        }
        fetching = true
        lastFetchStart = MonotonicClock.now()
        state.unlock()
        var served: [(name: String, id: Int64)]?
        do {
            let written = try cache.write(try fetch())
            served = written.served.map { ($0.loginName, $0.uid) }
            report(
                written.collisions.map { "not served, local files win: \($0)" }
                    + written.missingGroups.map { "local group \($0) does not exist here; its members do not join it" })
        } catch {
            report(["the user directory was not refreshed, the cache stays as it was: \(error)"])
        }
        state.lock()
        if let served {
            names = Set(served.map(\.name))
            ids = Set(served.map(\.id))
        }
        fetching = false
        fetchesDone += 1
        state.broadcast()
        state.unlock()
    }

    /// Logs what a refresh left out, or why it failed, when that changes: not every few minutes.
    private func report(_ lines: [String]) {
        state.lock()
        let changed = lines != reported
        reported = lines
        state.unlock()
        if changed { for line in lines { log(LOG_WARNING, line) } }
    }

    /// The answer to a miss: fetches first unless one began within `missMilliseconds`.
    func answer(_ query: DirectoryQuery) -> DirectoryQuery.Answer {
        state.lock()
        let recent = lastFetchStart.map { MonotonicClock.now().milliseconds - $0.milliseconds < missMilliseconds }
        state.unlock()
        if recent != true { refresh() }
        state.lock()
        defer { state.unlock() }
        switch query {
        case .name(let name): return names.contains(name) ? .found : .notFound
        case .id(let id): return ids.contains(Int64(id)) ? .found : .notFound
        }
    }

    /// The accept loop of the NSS socket: one short-lived thread per query, at most `maximumConnections` at once.
    public func serve(_ listener: Int32) -> Never {
        while true {
            let descriptor = accept(listener, nil, nil)
            guard descriptor >= 0 else {
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM { usleep(100_000) }
                continue
            }
            _ = fcntl(descriptor, F_SETFD, FD_CLOEXEC)
            let connection = DaemonConnection(descriptor: descriptor)
            state.lock()
            let admitted = open < maximumConnections
            if admitted { open += 1 }
            state.unlock()
            guard admitted else {
                try? connection.write(DirectoryQuery.Answer.unavailable.encoded, until: .deadline(in: 100))
                continue
            }
            Thread.detachNewThread { [self] in
                respond(on: connection)
                state.lock()
                open -= 1
                state.unlock()
            }
        }
    }

    /// A module sends its query at once; one that does not within a second is dropped.
    static let queryMilliseconds = 1_000

    private func respond(on connection: DaemonConnection) {
        let deadline = MonotonicClock.Instant.deadline(in: Self.queryMilliseconds)
        let answer: DirectoryQuery.Answer
        do {
            let header = try connection.read(DirectoryQuery.headerLength, until: deadline)
            let key = try connection.read(try DirectoryQuery.keyLength(ofHeader: header), until: deadline)
            answer = self.answer(try DirectoryQuery(parsing: header + key))
        } catch {
            log(LOG_NOTICE, "a directory query was dropped: \(error)")
            return
        }
        try? connection.write(answer.encoded, until: .deadline(in: Self.queryMilliseconds))
    }
}
