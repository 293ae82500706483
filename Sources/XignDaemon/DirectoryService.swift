import Foundation
import XignCore
import XignLogin
import XignProtocol

/// Users on every machine, on a host: keeps the directory cache fresh (the whole directory at start, then every
/// `refreshMilliseconds`) and answers the NSS module's misses on a socket of its own. A miss asks the manager for that
/// one name or number at once, so a person the host has never seen can log in as soon as the account exists; misses
/// draw from a small budget (`missBurst`, refilled at `missesPerSecond`), so a scan of sshd with made-up names costs
/// the manager little. Each uid that asks has a budget of its own (the kernel names it, SO_PEERCRED): a local user who
/// spends theirs leaves sshd's (root's) to the people logging in. A failed fetch leaves the cache as it was, to serve
/// for `keepMilliseconds` after the manager last answered.
public final class DirectoryService: @unchecked Sendable {
    /// The whole directory (nil) or the account with one name or number, with the host's sudo policies either way.
    public typealias Fetch = @Sendable (DirectoryQuery?) throws -> HostDirectory

    let cache: DirectoryCache
    let fetch: Fetch
    let refreshMilliseconds: Int64
    /// How long the cache serves after the last answer from the manager.
    let keepMilliseconds: Int64
    let missBurst: Double
    let missesPerSecond: Double
    let maximumConnections: Int
    let log: @Sendable (Int32, String) -> Void

    private let state = NSCondition()
    /// The last whole directory with what misses brought since; nil until a whole one arrived.
    private var users: [DirectoryUser]?
    private var sudoPolicies: [String: SudoPolicy] = [:]
    private var names: Set<String> = []
    private var ids: Set<Int64> = []
    private var refreshing = false
    private var refreshesDone = 0
    /// Per uid that asks: its misses left, and when they were last counted.
    private var missBudgets: [uid_t: (left: Double, at: MonotonicClock.Instant)] = [:]
    private var reported: [String] = []
    private var open = 0
    /// One cache write at a time, each from the newest list.
    private let writing = NSLock()

    public init(
        cache: DirectoryCache, fetch: @escaping Fetch, refreshMilliseconds: Int64 = 300_000,
        keepMilliseconds: Int64 = 7 * 86_400_000, missBurst: Double = 10, missesPerSecond: Double = 5,
        maximumConnections: Int = 32, log: @escaping @Sendable (Int32, String) -> Void
    ) {
        self.cache = cache
        self.fetch = fetch
        self.refreshMilliseconds = refreshMilliseconds
        self.keepMilliseconds = keepMilliseconds
        self.missBurst = missBurst
        self.missesPerSecond = missesPerSecond
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
                Thread.sleep(forTimeInterval: Double(refreshMilliseconds) / 1000)
            }
        }
    }

    /// Fetches the whole directory and writes it; a caller that comes while a refresh runs waits for it instead.
    func refresh() {
        state.lock()
        if refreshing {
            let awaited = refreshesDone + 1
            while refreshesDone < awaited { state.wait() }
            state.unlock()
            return
        }
        refreshing = true
        state.unlock()
        do {
            let fetched = try fetch(nil)
            try publish(fetched.sudoPolicies) { _ in fetched.users }
        } catch {
            report(["the user directory was not refreshed, the cache stays as it was: \(error)"])
        }
        state.lock()
        refreshing = false
        refreshesDone += 1
        state.broadcast()
        state.unlock()
    }

    /// Writes the cache from `change` applied to the current list, and serves what it wrote, for `keepMilliseconds`
    /// from now: it is written only after the manager answered.
    private func publish(
        _ policies: [String: SudoPolicy], _ change: ([DirectoryUser]?) -> [DirectoryUser]
    ) throws {
        try writing.withLock {
            let list = change(state.withLock { users })
            let now = Int64(Date().timeIntervalSince1970 * 1000)
            let written = try cache.write(
                list, sudoPolicies: policies, validUntil: (now + keepMilliseconds) / 1000, answeredAt: now / 1000)
            state.withLock {
                users = list
                sudoPolicies = policies
                names = Set(written.served.map(\.loginName))
                ids = Set(written.served.map(\.uid))
            }
            report(
                written.collisions.map { "not served, local users win: \($0)" }
                    + written.missingGroups.map { "local group \($0) does not exist here; its members do not join it" }
                    + written.refusedGroups.map {
                        "local group \($0) is not one this host grants ([directory] local_groups in xign.conf); its members do not join it"
                    })
        }
    }

    /// Logs what a refresh left out, or why it failed, when that changes: not every few minutes.
    private func report(_ lines: [String]) {
        let changed = state.withLock {
            defer { reported = lines }
            return lines != reported
        }
        if changed { for line in lines { log(LOG_WARNING, line) } }
    }

    private func serves(_ query: DirectoryQuery) -> Bool {
        state.withLock {
            switch query {
            case .name(let name), .recheck(let name): names.contains(name)
            case .id(let id): ids.contains(Int64(id))
            }
        }
    }

    /// Takes one miss from `uid`'s budget; false when it is spent. Budgets that are full again are forgotten, so the
    /// table holds only the uids that asked lately.
    private func spendMiss(for uid: uid_t) -> Bool {
        state.withLock {
            let now = MonotonicClock.now()
            missBudgets = missBudgets.filter { _, budget in
                budget.left + Double(now.milliseconds - budget.at.milliseconds) / 1000 * missesPerSecond < missBurst
            }
            let kept = missBudgets[uid] ?? (missBurst, now)
            let left = min(
                missBurst, kept.left + Double(now.milliseconds - kept.at.milliseconds) / 1000 * missesPerSecond)
            guard left >= 1 else {
                missBudgets[uid] = (left, now)
                return false
            }
            missBudgets[uid] = (left - 1, now)
            return true
        }
    }

    /// The answer to a miss of `uid`'s: asks the manager for that account (for the whole directory while none has
    /// come). A recheck (root's alone) replaces what the cache holds for the name with the manager's answer.
    func answer(_ query: DirectoryQuery, for uid: uid_t) -> DirectoryQuery.Answer {
        if case .recheck(let name) = query { return recheck(name, for: uid) }
        if serves(query) { return .found }
        guard spendMiss(for: uid) else { return .unavailable }
        if state.withLock({ users == nil }) {
            refresh()
        } else {
            do {
                let answer = try fetch(query)
                let found = answer.users
                if !found.isEmpty {
                    try publish(answer.sudoPolicies) { current in
                        (current ?? []).filter { user in
                            !found.contains { $0.loginName == user.loginName || $0.uid == user.uid }
                        } + found
                    }
                }
            } catch {
                log(LOG_WARNING, "a lookup the cache missed could not ask the manager: \(error)")
                return .unavailable
            }
        }
        return serves(query) ? .found : .notFound
    }

    private func recheck(_ name: String, for uid: uid_t) -> DirectoryQuery.Answer {
        guard uid == 0 else {
            log(LOG_NOTICE, "a recheck of \(name) from uid \(uid) was refused: only root's account phase asks one")
            return .unavailable
        }
        guard spendMiss(for: uid) else { return .unavailable }
        if state.withLock({ users == nil }) {
            refresh()
            return serves(.name(name)) ? .found : .notFound
        }
        do {
            let answer = try fetch(.name(name))
            let found = answer.users
            try publish(answer.sudoPolicies) { current in
                (current ?? []).filter { user in
                    user.loginName != name && !found.contains { $0.loginName == user.loginName || $0.uid == user.uid }
                } + found
            }
        } catch {
            log(LOG_WARNING, "a recheck of \(name) could not ask the manager: \(error)")
            return .unavailable
        }
        return serves(.name(name)) ? .found : .notFound
    }

    /// The accept loop of the NSS socket: one short-lived thread per query, at most `maximumConnections` at once.
    public func serve(_ listener: Int32) -> Never {
        while true {
            let connection = DaemonSocket.nextConnection(on: listener)
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
            // A peer the kernel cannot name counts as one uid of its own.
            answer = self.answer(
                try DirectoryQuery(parsing: header + key), for: connection.peerCredentials()?.uid ?? uid_t.max)
        } catch {
            log(LOG_NOTICE, "a directory query was dropped: \(error)")
            return
        }
        try? connection.write(answer.encoded, until: .deadline(in: Self.queryMilliseconds))
    }
}
