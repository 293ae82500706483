import Foundation
import XignCore
import XignLogin
import XignProtocol

/// The accept loop: one thread per connection, at most `maximumConnections` at once and `maximumPerUid` for
/// one caller, so one user holding connections open cannot keep the others out.
public final class Daemon: @unchecked Sendable {
    let configuration: ClientConfiguration
    let configPath: String
    let attempts: AttemptLimit
    let maximumConnections: Int
    let maximumPerUid: Int
    private let lock = NSLock()
    private var open: [UInt32: Int] = [:]

    public init(configPath: String, maximumConnections: Int = 64, maximumPerUid: Int = 8) throws {
        self.configPath = configPath
        configuration = try ClientConfiguration.load(path: configPath)
        try AtomicFile.makeDirectory(configuration.stateDirectory)
        attempts = AttemptLimit(path: configuration.stateDirectory + "/xignd-attempts.json")
        do { try attempts.check() } catch { throw DaemonSetupError("\(error), and start xignd again") }
        self.maximumConnections = maximumConnections
        self.maximumPerUid = maximumPerUid
    }

    public func serve(_ listener: Int32) -> Never {
        log(LOG_NOTICE, "xignd \(XignCoreVersion.string) serving with \(configPath)")
        while true {
            let connection = DaemonSocket.nextConnection(on: listener)
            guard let peer = connection.peerCredentials() else { continue }
            guard admit(peer.uid) else {
                try? connection.send(
                    DaemonReply.failure(.busy(message: "xignd has too many connections open; try again")),
                    deadline: .deadline(in: 1_000))
                log(LOG_WARNING, "uid=\(peer.uid) pid=\(peer.pid): connection refused, too many open")
                continue
            }
            Thread.detachNewThread { [self] in
                DaemonSession(connection: connection, peer: peer, daemon: self).run()
                release(peer.uid)
            }
        }
    }

    private func admit(_ uid: UInt32) -> Bool {
        lock.withLock {
            guard open.values.reduce(0, +) < maximumConnections, open[uid, default: 0] < maximumPerUid else {
                return false
            }
            open[uid, default: 0] += 1
            return true
        }
    }

    private func release(_ uid: UInt32) {
        lock.withLock {
            open[uid, default: 1] -= 1
            if open[uid] == 0 { open[uid] = nil }
        }
    }

    /// Serves the user directory of this host (when it has joined a manager) to the NSS module: the cache in
    /// `directory`, refreshed every `refreshSeconds`, and the socket there for misses.
    public func startDirectory(at directory: String, refreshSeconds: Int) throws {
        guard (try? XignSdk(configuration: configuration, localUser: "root").hostEnrolment()) != nil else {
            log(LOG_INFO, "this machine has not joined a manager as a host: no user directory to serve")
            return
        }
        try AtomicFile.makeDirectory(directory, mode: 0o755, enforceMode: true)
        let listener = try DaemonSocket.listen(at: directory + "/" + DirectoryFiles.socket)
        let configuration = configuration
        let service = DirectoryService(
            cache: DirectoryCache(
                directory: directory, grantedGroups: configuration.grantedLocalGroups, nsswitch: "/etc/nsswitch.conf"),
            fetch: { try XignSdk(configuration: configuration, localUser: "root").fetchHostDirectory($0) },
            refreshMilliseconds: Int64(refreshSeconds) * 1000,
            keepMilliseconds: configuration.directoryKeepMilliseconds, log: { [self] in log($0, $1) })
        service.startRefreshing()
        Thread.detachNewThread { service.serve(listener) }
    }

    /// One line on stderr with its syslog priority in front, as journald reads it. Callers' fields are in
    /// `message`, so all of it goes through `LogText`: one entry per call, at this priority.
    func log(_ priority: Int32, _ message: String) {
        let line = "<\(priority)>" + LogText.line(message) + "\n"
        FileHandle.standardError.write(Data(line.utf8))
    }
}
