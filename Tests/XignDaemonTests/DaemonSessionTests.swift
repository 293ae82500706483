import Foundation
import Testing
import XignTestSupport

@testable import XignDaemon
@testable import XignLogin

/// xignd's server without its socket: a session over a socket pair, driven by a scripted client that says what a
/// caller without root may say. The caller's uid is the test's to choose (SO_PEERCRED stands in the accept loop).
@Suite struct DaemonSessionTests {
    let directory = TemporaryDirectory()
    let daemon: Daemon

    init() throws {
        chmod(directory.path, 0o755)
        let config = try directory.write("xign.conf", "state_dir = \(directory.file("state"))\n", mode: 0o644)
        daemon = try Daemon(configPath: config)
    }

    /// Runs one session for a caller of `uid` and returns the client's end.
    func session(uid: uid_t) throws -> DaemonConnection {
        var pair: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &pair) == 0 else {
            throw TestFailure("socketpair: \(String(cString: strerror(errno)))")
        }
        let server = DaemonConnection(descriptor: pair[0])

        let peer = DaemonConnection.PeerCredentials(pid: getpid(), uid: uid, gid: uid)
        let session = DaemonSession(connection: server, peer: peer, daemon: daemon)
        // The server's end closes when the session is done with it (DaemonConnection's deinit).
        Thread.detachNewThread { session.run() }
        return DaemonConnection(descriptor: pair[1])
    }

    func reply(to request: DaemonRequest, as uid: uid_t = 65534) throws -> DaemonReply {
        let client = try session(uid: uid)
        try client.send(request, deadline: .deadline(in: 5_000))
        return try client.receive(DaemonReply.self, deadline: .deadline(in: 10_000))
    }

    @Test func aConnectionStartsWithARequest() throws {
        #expect(
            try reply(to: .answer(text: "24680")) == .failure(.refused(message: "a connection starts with a request")))
    }

    @Test func aCallerActsOnlyForItselfAndRootForAnyone() throws {
        let others = try reply(to: .pendingConfirmations(user: "root", waitMilliseconds: 0))
        #expect(others == .failure(.refused(message: "you may use only your own XignIn enrolment, not that of root")))
        #expect(
            try reply(to: .pendingConfirmations(user: "no-such-user-here", waitMilliseconds: 0))
                == .failure(.refused(message: "there is no local user no-such-user-here")))
        // Controls: nobody for itself, and root for nobody, reach the SDK, which finds no enrolment to ask with.
        let unenrolled = DaemonReply.failure(
            .sdk(
                code: .identityManagerNotFound, message: "nobody has no enrolment on this machine; personalize it first"
            ))
        #expect(try reply(to: .pendingConfirmations(user: "nobody", waitMilliseconds: 0)) == unenrolled)
        #expect(try reply(to: .pendingConfirmations(user: "nobody", waitMilliseconds: 0), as: 0) == unenrolled)
    }

    /// A user without an enrolment is told nothing of PIN attempts, and nothing is charged.
    @Test func aLoginWithoutAnEnrolmentEndsUnknownAndChargesNothing() throws {
        let login = DaemonLoginRequest(
            user: "nobody", service: "locker", ruser: nil, rhost: nil, tty: nil, arguments: [])
        #expect(try reply(to: .login(login)) == .loginEnded(outcome: .unknownUser))
        let attempts =
            (try? String(contentsOfFile: directory.file("state/xignd-attempts.json"), encoding: .utf8)) ?? "{}"
        #expect(attempts == "{}", "\(attempts)")
    }

    /// Bytes that are no request end the session without an answer; the daemon goes on with the next.
    @Test func garbageIsNoRequest() throws {
        let client = try session(uid: 65534)
        let garbage: [UInt8] = [0, 0, 0, 9] + Array("{{{{{{{{{".utf8)
        _ = garbage.withUnsafeBytes { send(client.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(throws: (any Error).self) { try client.receive(DaemonReply.self, deadline: .deadline(in: 10_000)) }
        #expect(try reply(to: .answer(text: "")) == .failure(.refused(message: "a connection starts with a request")))
    }
}
