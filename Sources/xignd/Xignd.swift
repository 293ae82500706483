import ArgumentParser
import Foundation
import XignCore
import XignDaemon
import XignDevice
import XignProtocol

/// xignd: logins and approvals for callers without root (screen lockers, `xign-setup approve` in a desktop
/// session). Verification only: it never enrolls or removes anything.
@main
struct Xignd: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "xignd",
        abstract: "Check XignIn PINs for callers without root, such as screen lockers.",
        discussion: "Under systemd it takes its socket from xignd.socket; otherwise it listens at --socket.",
        version: XignCoreVersion.string
    )

    @Option(help: "Config file.") var config = ClientConfiguration.defaultPath
    @Option(help: "Listen at this path (mode 0666) instead of taking the socket from systemd.") var socket: String?
    @Option(help: "Connections open at once, in all.") var maxConnections = 64
    @Option(help: "Connections open at once for one uid.") var maxConnectionsPerUser = 8
    @Option(help: "Where the user directory's cache and the NSS module's socket are.")
    var directory = DirectoryFiles.directory
    @Option(help: "Fetch the user directory from the manager this often, in seconds (5 to 86400).")
    var directoryRefresh = 300
    @Flag(help: "Do not serve the user directory (a machine that has not joined a manager as a host).")
    var noDirectory = false

    func validate() throws {
        guard (1...4096).contains(maxConnections), (1...maxConnections).contains(maxConnectionsPerUser) else {
            throw ValidationError("--max-connections must be 1 to 4096 and --max-connections-per-user 1 to that")
        }
        guard (5...86_400).contains(directoryRefresh) else {
            throw ValidationError("--directory-refresh must be 5 to 86400 seconds")
        }
        guard directory.hasPrefix("/"), directory.utf8.count < 100 else {
            throw ValidationError("--directory must be an absolute path under 100 bytes")
        }
        if let socket, !socket.hasPrefix("/") || socket.utf8.count >= 108 {
            throw ValidationError("--socket must be an absolute path under 108 bytes")
        }
    }

    func run() throws {
        guard geteuid() == 0 else {
            throw ValidationError("xignd runs as root: it reads /var/lib/xign and the TPM for its callers")
        }
        signal(SIGPIPE, SIG_IGN)
        TPMLog.quiet()
        let daemon: Daemon
        let listener: Int32
        do {
            daemon = try Daemon(
                configPath: config, maximumConnections: maxConnections, maximumPerUid: maxConnectionsPerUser)
            listener = try socket.map(DaemonSocket.listen(at:)) ?? DaemonSocket.fromSystemd()
            if !noDirectory { try daemon.startDirectory(at: directory, refreshSeconds: directoryRefresh) }
        } catch {
            FileHandle.standardError.write(Data("<3>xignd: \(error)\n".utf8))
            throw ExitCode.failure
        }
        daemon.serve(listener)
    }
}
