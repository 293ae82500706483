import Foundation
import XignCore

@testable import XignDaemon
@testable import XignLogin

#if canImport(Glibc)
import Glibc
#endif

/// xignd's side of its socket: the input is everything a caller writes on one connection (length-prefixed
/// messages, a login's answers, or bytes that are none of these), read by a real session through a socket pair.
/// SSSD's 2026 CVEs were length bugs in this layer of its responder.
extension FuzzTarget {
    /// xignd with a state directory of its own and a manager it cannot reach, so no input waits on the network.
    /// Made once: a daemon per input would open files for each. The directory goes when the run ends (libFuzzer exits).
    nonisolated(unsafe) static let daemon: Daemon = {
        let directory = daemonDirectory
        atexit { try? FileManager.default.removeItem(atPath: FuzzTarget.daemonDirectory) }
        try! FileManager.default.createDirectory(atPath: directory + "/state", withIntermediateDirectories: true)
        let config = directory + "/xign.conf"
        try! Data(
            "state_dir = \(directory)/state\nmanager_url = http://127.0.0.1:9\ndevice_key = software\ntimeout = 1\n"
                .utf8
        ).write(to: URL(fileURLWithPath: config))
        chmod(config, 0o600)
        return try! Daemon(configPath: config)
    }()

    private static var daemonDirectory: String { NSTemporaryDirectory() + "xign-fuzz-daemon-\(getpid())" }

    nonisolated(unsafe) static let daemonSocket = FuzzTarget(name: "daemon-socket") { input in
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else { return }
        let server = DaemonConnection(descriptor: pair[0])
        let caller = pair[1]
        defer { close(caller) }
        // The socket pair's buffer holds what a caller wrote; more would block this single thread.
        var size = Int32(max(input.count, 4096) * 2)
        setsockopt(caller, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(pair[0], SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        let written = input.withUnsafeBytes { send(caller, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
        guard written == input.count else { return }
        shutdown(caller, Int32(SHUT_WR))
        // Caller uid: nobody, so a request for any other user is refused as it would be at the real socket.
        let peer = DaemonConnection.PeerCredentials(pid: getpid(), uid: 65534, gid: 65534)
        DaemonSession(connection: server, peer: peer, daemon: daemon).run()
    }
}
