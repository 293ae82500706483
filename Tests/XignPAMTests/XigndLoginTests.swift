import Foundation
import Testing
import XignCore
import XignLogin
import XignTestSupport

/// Hosts that run PAM without root (screen lockers): the module hands the login to the real xignd over its socket.
/// The enrolments belong to the system users nobody and daemon, and the hosts run as nobody (setpriv).
@Suite(.serialized) struct XigndLoginTests {
    let fixture: PAMFixture
    let daemon: DaemonProcess
    var attemptsFile: String { fixture.state + "/xignd-attempts.json" }

    init() throws {
        fixture = try PAMFixture(users: ["nobody", "daemon"])
        try fixture.allowHostsWithoutRoot()
        daemon = try DaemonProcess(configPath: fixture.configPath, directory: fixture.directory)
        try fixture.service("locker", arguments: "socket=\(daemon.socketPath)")
        try fixture.service(
            "locker-safe", arguments: "socket=\(daemon.socketPath) failmode=safe", then: "auth required pam_deny.so")
    }

    func pamtester(_ user: String, as caller: String = "nobody", pin: String) throws -> ChildProcess.Result {
        try fixture.pamtester(["-v", "locker", user, "authenticate"], stdin: pin + "\n", asUser: caller)
    }

    func lockerLogin(
        _ user: String = "nobody", service: String = "locker", answers: [String] = ["24680"],
        unusedAnswersAllowed: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> PAMFixture.Login {
        try fixture.login(
            user, service: service, answers: answers, wrapper: try fixture.atSeat(as: "nobody"),
            unusedAnswersAllowed: unusedAnswersAllowed,
            sourceLocation: sourceLocation)
    }

    @Test func pamtesterAsTheUserLogsInThroughXigndAndAWrongPINFails() throws {
        let right = try pamtester("nobody", pin: "24680")
        #expect(right.status == 0, "\(right.stdout) \(right.stderr) \(daemon.log)")
        #expect((right.stdout + right.stderr).contains("successfully authenticated"), "\(right.stdout)")
        #expect(try fixture.completedLogins("nobody") == 1)

        let wrong = try pamtester("nobody", pin: "13570")
        #expect(wrong.status != 0)
        #expect(wrong.stderr.contains("Authentication failure"), "\(wrong.stderr)")
        #expect(try fixture.failedAttempts("nobody@example.org") == 1, "the manager counted the wrong PIN")
        #expect(try fixture.completedLogins("nobody") == 1)
    }

    @Test func aUserCannotTestAnotherUsersPIN() throws {
        let other = try lockerLogin("daemon", answers: [])
        #expect(other.code == PAMCode.authError, "\(other.output)")
        #expect(
            other.conversation == "[ERROR_MSG] XignIn: you may use only your own XignIn enrolment, not that of daemon",
            "\(other.conversation)")
        #expect(!other.conversation.contains("PIN for"), "no PIN is asked for another user's enrolment")
        #expect(daemon.log.contains("uid=65534"), "xignd logs the refusal with the caller's uid")
        #expect(try fixture.failedAttempts("daemon@example.org") == 0)
        #expect(try pamtester("daemon", pin: "24680").status != 0, "not even with the right PIN")
        #expect(try fixture.completedLogins("daemon") == 0)
        // Honest control: root may act for any user through xignd.
        let approver = DaemonLoginApprover(user: "daemon", socketPath: daemon.socketPath)
        #expect(try approver.pendingConfirmations(waitMilliseconds: 0).isEmpty)
    }

    @Test func theConversationIsTheModulesOwn() throws {
        let login = try lockerLogin()
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(login.conversation == "[PROMPT_ECHO_OFF] XignIn PIN for nobody's laptop: ")
        let wrong = try lockerLogin(answers: ["13570"])
        #expect(wrong.code == PAMCode.authError)
        #expect(
            wrong.conversation.hasPrefix(
                "[PROMPT_ECHO_OFF] XignIn PIN for nobody's laptop: \n[ERROR_MSG] Wrong PIN. XignIn is locked until"),
            "\(wrong.conversation)")
    }

    @Test func rootLogsInInProcessWithXigndStopped() throws {
        daemon.kill()
        let login = try fixture.login("nobody", service: "locker", wrapper: try fixture.atSeat("root"))
        #expect(login.code == PAMCode.success, "\(login.output)")
    }

    @Test func withoutXigndTheLockerIsToldAndGetsAuthinfoUnavailable() throws {
        daemon.kill()
        let login = try lockerLogin(answers: [])
        #expect(login.code == PAMCode.authInfoUnavailable, "\(login.output)")
        #expect(
            login.conversation
                == "[ERROR_MSG] XignIn cannot check your PIN: the xignd service does not answer. Ask your administrator to start xignd.socket."
        )
        let safe = try lockerLogin(service: "locker-safe", answers: [])
        #expect(
            safe.code == PAMCode.authError && safe.conversation.isEmpty,
            "failmode=safe is silent and lets the rest of the stack (pam_deny) decide: \(safe.output)")
    }

    @Test func xigndKilledMidRequestEndsTheLoginAndKeepsItsAttemptRecord() throws {
        // A manager that answers slowly holds xignd in the middle of the login.
        let slow = try FaultyServer.delaying(3, to: fixture.manager.port)
        try fixture.redirectEnrolments(to: slow.url)
        let started = Date()
        // xignd asks for the PIN only after the manager's answer, which never comes.
        let login = try fixture.startLogin(
            "nobody", service: "locker", answers: [], wrapper: try fixture.atSeat(as: "nobody"))
        #expect(waitUntil(seconds: 20) { !slow.requests.isEmpty })
        daemon.kill()
        let result = try fixture.finish(login)
        #expect(result.code == PAMCode.authInfoUnavailable, "\(result.output)")
        #expect(Date().timeIntervalSince(started) < 10, "the locker learns at once that xignd is gone")
        let record =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: attemptsFile)))
            as? [String: [String: Double]]
        #expect(
            record?["65534"]?["attempts"] == 4,
            "the attempt was recorded before the manager was asked: \(String(describing: record))")
        try daemon.start()
        try fixture.redirectEnrolments(to: fixture.manager.url.description, from: slow.url)
        #expect(try lockerLogin().code == PAMCode.success, "\(daemon.log)")
        let after = (try? String(contentsOfFile: attemptsFile, encoding: .utf8)) ?? "{}"
        #expect(after == "{}", "a right PIN gives the allowance back")
    }

    @Test func xigndsAttemptLimitHoldsAcrossARestart() throws {
        // Each takes from xignd's allowance; the manager's lock after the first wrong PIN refuses some before the PIN,
        // as its delay and this loop's pace decide.
        for _ in 0..<5 {
            #expect(try lockerLogin(answers: ["13570"], unusedAnswersAllowed: true).code != PAMCode.success)
        }
        let refused = try lockerLogin(answers: [])
        #expect(refused.code == PAMCode.maxTries, "\(refused.output)")
        #expect(
            refused.conversation.hasPrefix(
                "[ERROR_MSG] XignIn: Too many PIN attempts for nobody on this machine; try again in"),
            "\(refused.conversation)")
        daemon.kill(SIGTERM)
        try daemon.start()
        #expect(try lockerLogin(answers: []).code == PAMCode.maxTries, "a restart hands out no new attempts")
        let other = try fixture.login("daemon", service: "locker", wrapper: try fixture.atSeat(as: "daemon"))
        #expect(other.code == PAMCode.success, "each uid has its own allowance: \(other.output)")
    }

    @Test func aUserWithoutAnEnrolmentIsUnknownAndSpendsNoAttempts() throws {
        for _ in 0..<7 {
            let login = try fixture.login("bin", service: "locker", answers: [], wrapper: try fixture.atSeat(as: "bin"))
            #expect(login.code == PAMCode.userUnknown && login.conversation.isEmpty, "\(login.output)")
        }
        let stored = (try? String(contentsOfFile: attemptsFile, encoding: .utf8)) ?? "{}"
        #expect(stored == "{}", "\(stored)")
    }

    /// xignd's stderr read as journald reads a service's stdout stream: an entry ends at LF or NUL, and `<N>` at
    /// its start is its priority (the rest of the entry's text keeps nothing else).
    static func journalEntries(_ stream: String) -> [(priority: Int?, text: String)] {
        stream.split(whereSeparator: { $0 == "\n" || $0 == "\0" }).map { line in
            guard line.hasPrefix("<"), let close = line.firstIndex(of: ">"),
                let priority = Int(line[line.index(after: line.startIndex)..<close]),
                (0...7).contains(priority)
            else { return (nil, String(line)) }
            return (priority, String(line[line.index(after: close)...]))
        }
    }

    /// One connection from a user without an enrolment, with fields PAM could never carry (a NUL, a line feed, a
    /// level prefix): xignd writes exactly one journal entry for it, at its own priority, the forgery inside it.
    @Test func aCallersFieldsCannotForgeJournalEntries() throws {
        let forged = "sshd\0<0>sshd[4242]: Accepted password for root from 203.0.113.9\n<2>kernel: panic"
        let request = DaemonRequest.login(
            DaemonLoginRequest(
                user: "bin", service: forged, ruser: "\u{1b}[2Jroot\n<0>x", rhost: "host\u{202e}moc.evil", tty: nil,
                arguments: []))
        let body = try JSONEncoder().encode(request)
        let frame =
            [
                UInt8(body.count >> 24), UInt8(body.count >> 16 & 0xFF), UInt8(body.count >> 8 & 0xFF),
                UInt8(body.count & 0xFF),
            ] + body
        let script = """
            import socket, sys
            client = socket.socket(socket.AF_UNIX); client.settimeout(20); client.connect(sys.argv[1])
            client.sendall(bytes.fromhex(sys.argv[2]))
            while client.recv(4096): pass
            """
        // Only bin's entries: xignd may still be logging the test's own readiness probe (uid 0).
        let bin = "uid=\(try #require(getpwnam("bin")).pointee.pw_uid) "
        func entries() -> [(priority: Int?, text: String)] {
            Self.journalEntries(daemon.log).filter { $0.text.hasPrefix(bin) }
        }
        let before = entries().count
        let command =
            PAMFixture.runAs("bin") + [
                "/usr/bin/python3", "-c", script, daemon.socketPath, frame.map { String(format: "%02x", $0) }.joined(),
            ]
        let client = try ChildProcess(command[0], Array(command.dropFirst()), in: fixture.directory).wait(timeout: 30)
        #expect(client.status == 0, "\(client.stderr)")
        let new = Array(entries().dropFirst(before))
        #expect(new.count == 1, "one entry: \(new)")
        #expect(new.first?.priority == Int(LOG_WARNING) && new.first?.text.contains("user=bin") == true, "\(new)")
        #expect(
            new.first?.text.contains("sshd[4242]: Accepted password for root") == true,
            "the forgery is kept, inside xignd's own entry")
        let all = Self.journalEntries(daemon.log)
        #expect(
            !all.contains { $0.text.hasPrefix("sshd[4242]") || $0.text.hasPrefix("kernel:") },
            "no entry of its own: \(all)")
        #expect(!daemon.log.unicodeScalars.contains { $0.value == 0 || $0.value == 0x1B || $0.value == 0x202E })
        #expect(!all.contains { ($0.priority ?? 7) < Int(LOG_ERR) }, "nothing at emerg, alert or crit")

        // The control: the same kind of request with plain fields is one entry too, at the same priority.
        let plain = try JSONEncoder().encode(
            DaemonRequest.login(
                DaemonLoginRequest(user: "bin", service: "sshd", ruser: "root", rhost: "host", tty: nil, arguments: []))
        )
        let plainFrame = [0, 0, UInt8(plain.count >> 8), UInt8(plain.count & 0xFF)] + plain
        let count = entries().count
        let again =
            PAMFixture.runAs("bin") + [
                "/usr/bin/python3", "-c", script, daemon.socketPath,
                plainFrame.map { String(format: "%02x", $0) }.joined(),
            ]
        #expect(
            try ChildProcess(again[0], Array(again.dropFirst()), in: fixture.directory).wait(timeout: 30).status == 0)
        #expect(entries().count == count + 1 && entries().last?.priority == Int(LOG_WARNING))
    }

    @Test func theSocketIsMadeWithItsModeAndNeverInADirectoryOthersCanWrite() throws {
        var status = stat()
        #expect(
            lstat(daemon.socketPath, &status) == 0 && status.st_mode & S_IFMT == S_IFSOCK
                && status.st_mode & 0o777 == 0o666)
        let shared = fixture.directory.file("shared")
        try FileManager.default.createDirectory(atPath: shared, withIntermediateDirectories: false)
        chmod(shared, 0o1777)
        let target = try fixture.directory.write("target", "root's file\n", mode: 0o600)
        symlink(target, shared + "/xignd.sock")
        let refused = try ChildProcess(
            try Products.path("xignd"),
            ["--config", fixture.configPath, "--socket", shared + "/xignd.sock", "--no-directory"],
            in: fixture.directory
        )
        .wait(timeout: 20)
        #expect(refused.status != 0 && refused.stderr.contains("can be written by other users"), "\(refused.stderr)")
        #expect(lstat(target, &status) == 0 && status.st_mode & 0o777 == 0o600, "the link's target keeps its mode")
        // The control: the same directory closed to others takes the socket (the link is not a socket, so it is refused
        // by name; removed, xignd listens).
        chmod(shared, 0o755)
        unlink(shared + "/xignd.sock")
        let own = try DaemonProcess(
            configPath: fixture.configPath, socketPath: shared + "/xignd.sock", directory: fixture.directory)
        #expect(lstat(own.socketPath, &status) == 0 && status.st_mode & 0o777 == 0o666)
    }

    @Test func idleConnectionsAreClosedAndOneCallerCannotTakeThemAll() throws {
        // Root opens 12 connections and says nothing: at most 8 (one uid's share) are taken, the rest are turned away.
        let idle = try (0..<12).map { _ in
            try DaemonConnection.connect(path: daemon.socketPath, timeoutMilliseconds: 2_000)
        }
        usleep(2_000_000)
        let turnedAway = idle.filter { connection in
            var entry = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 0) == 1 else { return false }
            return (try? connection.receive(DaemonReply.self, deadline: .deadline(in: 1_000)))
                == .failure(.busy(message: "xignd has too many connections open; try again"))
        }
        #expect(turnedAway.count >= 4, "\(daemon.log)")
        // Another user is still served.
        #expect(try lockerLogin().code == PAMCode.success, "\(daemon.log)")
        // A silent connection is closed after 10 s.
        let taken = try #require(idle.first { connection in !turnedAway.contains { $0 === connection } })
        var byte: UInt8 = 0
        var entry = pollfd(fd: taken.descriptor, events: Int16(POLLIN), revents: 0)
        #expect(
            poll(&entry, 1, 15_000) == 1 && recv(taken.descriptor, &byte, 1, 0) == 0, "xignd closed the idle connection"
        )
    }

    @Test func malformedAndOversizedRequestsAreRefusedAndTheDaemonGoesOn() throws {
        for garbage in [[UInt8](repeating: 0xFF, count: 4), [0, 0, 0, 5] + Array("{\"a\":".utf8), [0, 1, 0, 0]] {
            let connection = try DaemonConnection.connect(path: daemon.socketPath, timeoutMilliseconds: 2_000)
            _ = garbage.withUnsafeBytes { send(connection.descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            var byte: UInt8 = 0
            var entry = pollfd(fd: connection.descriptor, events: Int16(POLLIN), revents: 0)
            #expect(
                poll(&entry, 1, 15_000) == 1 && recv(connection.descriptor, &byte, 1, 0) == 0,
                "xignd closes the connection")
        }
        #expect(try lockerLogin().code == PAMCode.success, "\(daemon.log)")
    }

    /// A stand-in at a socket of its own, run as `owner`, that answers every connection with `reply` (a whole frame),
    /// then reads until the module hangs up, as xignd does: a peer that closes with the module's request unread
    /// resets the connection, and the reset can discard the reply before the module reads it.
    func standIn(_ name: String, owner: String, reply: [UInt8]) throws -> ChildProcess {
        let directory = fixture.directory.file(name)
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        guard let entry = getpwnam(owner), chown(directory, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0 else {
            throw TestFailure("chown \(directory)")
        }
        try writeTestFile(directory + "/reply", Data(reply), mode: 0o644)
        try writeTestFile(directory + "/answer", Data("cat '\(directory)/reply'\ncat >/dev/null\n".utf8), mode: 0o644)
        let command =
            PAMFixture.runAs(owner) + [
                "/usr/bin/socat", "UNIX-LISTEN:\(directory)/xignd.sock,mode=666,fork", "SYSTEM:sh \(directory)/answer",
            ]
        let process = try ChildProcess(command[0], Array(command.dropFirst()), in: fixture.directory)
        guard waitUntil(seconds: 10, { FileManager.default.fileExists(atPath: directory + "/xignd.sock") }) else {
            throw TestFailure("socat did not listen")
        }
        try fixture.service(name, arguments: "socket=\(directory)/xignd.sock")
        return process
    }

    static func frame(_ json: String) -> [UInt8] {
        let body = Array(json.utf8)
        return [0, 0, UInt8(body.count >> 8), UInt8(body.count & 0xFF)] + body
    }

    @Test func onlyRootsDaemonIsBelieved() throws {
        let success = Self.frame(#"{"loginEnded":{"outcome":{"signedIn":{}}}}"#)
        // A user's own listener that says "success" is not xignd.
        let impostor = try standIn("impostor", owner: "nobody", reply: success)
        defer { impostor.stop() }
        let refused = try lockerLogin(service: "impostor", answers: [])
        #expect(refused.code == PAMCode.authInfoUnavailable, "\(refused.output)")
        // Honest control: the same answer from root's socket is believed; only the owner differs.
        let rooted = try standIn("rooted", owner: "root", reply: success)
        defer { rooted.stop() }
        #expect(try lockerLogin(service: "rooted", answers: []).code == PAMCode.success)
        // Root's daemon with a garbled answer, or an outcome the module does not know: neither is an answer.
        let garbled = try standIn("garbled", owner: "root", reply: [0, 0, 0, 9] + Array("{{{{{{{{{".utf8))
        defer { garbled.stop() }
        #expect(try lockerLogin(service: "garbled", answers: []).code == PAMCode.authInfoUnavailable)
        let strange = try standIn(
            "strange", owner: "root", reply: Self.frame(#"{"loginEnded":{"outcome":{"flying":{}}}}"#))
        defer { strange.stop() }
        #expect(try lockerLogin(service: "strange", answers: []).code == PAMCode.authInfoUnavailable)
    }

    @Test func twoUsersLogInAtOnce() throws {
        let logins = ["nobody", "daemon"].map { user in
            Thread.detachedResult {
                try fixture.login(user, service: "locker", answers: ["24680"], wrapper: try fixture.atSeat(as: user))
            }
        }
        for login in logins { #expect(try login.value(timeout: 60).code == PAMCode.success) }
    }
}
