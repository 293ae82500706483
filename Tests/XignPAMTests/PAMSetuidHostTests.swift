import Foundation
import Testing
import XignTestSupport

/// pam_xign.so inside a setuid host (su, sudo) run by an ordinary user, who chooses the environment:
/// no library on the login's path may act on it, and the host gets it back unchanged (docs/security.md).
@Suite struct PAMSetuidHostTests {
    let tpm: SoftwareTPM
    let fixture: PAMFixture
    /// Where the caller asks root to write the TPM trace and the TLS secrets.
    let traps: TemporaryDirectory

    init() throws {
        tpm = try SoftwareTPM()
        // nobody runs the setuid host and logs in as itself; root's enrolment is someone else's.
        fixture = try PAMFixture(users: ["alice", "nobody", "root"], tpm: tpm)
        traps = TemporaryDirectory()
    }

    func callerEnvironment(_ traps: TemporaryDirectory) -> [String: String] {
        [
            "PATH": "/usr/bin:/bin", "TSS2_LOG": "all+trace", "TSS2_LOGFILE": traps.file("tss2.log"),
            "SSLKEYLOGFILE": traps.file("tls-keys.log"),
        ]
    }

    var trapsSprung: [String] {
        ["tss2.log", "tls-keys.log"].filter { FileManager.default.fileExists(atPath: traps.file($0)) }
    }

    /// Honest control: the same variables in a host that is not setuid take effect, so the test can see them.
    func plainLogin() throws -> (PAMFixture.Login, TemporaryDirectory) {
        let control = TemporaryDirectory()
        let login = try fixture.login(environment: callerEnvironment(control))
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(
            FileManager.default.fileExists(atPath: control.file("tss2.log")),
            "a host that is not setuid keeps its environment")
        #expect(login.output.contains("environment_unchanged=1 conversation_environment_unchanged=1"))
        return (login, control)
    }

    /// The libpam harness as a setuid-root program, run by `nobody`: AT_SECURE is set, as in su.
    func setuidLogin(
        _ user: String = "nobody", answers: [String], in other: PAMFixture? = nil,
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> PAMFixture.Login {
        let fixture = other ?? fixture
        let host = fixture.directory.file("setuid-harness")
        if !FileManager.default.fileExists(atPath: host) {
            try writeTestFile(
                host, try Data(contentsOf: URL(fileURLWithPath: try PAMFixture.harness.get())), mode: 0o755)
            guard chown(host, 0, 0) == 0, chmod(host, 0o4755) == 0, chmod(fixture.directory.path, 0o711) == 0 else {
                throw TestFailure("cannot make the setuid host: \(String(cString: strerror(errno)))")
            }
        }
        return try fixture.login(
            user, answers: answers, wrapper: try fixture.atSeat(as: "nobody"),
            harness: host, environment: callerEnvironment(traps), sourceLocation: sourceLocation)
    }

    func expectIsolated(_ login: PAMFixture.Login, code: Int) {
        #expect(login.code == code, "\(login.output)")
        #expect(trapsSprung.isEmpty, "root wrote where the caller said: \(trapsSprung)")
        #expect(
            login.output.contains("environment_unchanged=1 conversation_environment_unchanged=1"), "\(login.output)")
    }

    @Test func theCallersLogFilesAreNeverWrittenWithARightOrAWrongPIN() throws {
        _ = try plainLogin()
        expectIsolated(try setuidLogin(answers: ["24680"]), code: PAMCode.success)
        expectIsolated(try setuidLogin(answers: ["13570"]), code: PAMCode.authError)
    }

    /// su is setuid: without this rule any user could test another's PIN as root, and lock it at the last guess.
    @Test func aCallerMayUseOnlyItsOwnEnrolmentAndAnothersIsRefusedBeforeAnyPIN() throws {
        let other = try setuidLogin("root", answers: [])
        #expect(other.code == PAMCode.authError, "\(other.output)")
        #expect(
            other.conversation
                == "[ERROR_MSG] XignIn: here you can use only your own enrolment; root must log in as themselves.",
            "no PIN prompt: \(other.conversation)")
        #expect(try fixture.failedAttempts("root@example.org") == 0, "the manager counted nothing")
        // Honest controls: the caller's own enrolment logs in, and root itself may still use root's.
        #expect(try setuidLogin(answers: ["24680"]).code == PAMCode.success)
        #expect(try fixture.login("root").code == PAMCode.success)
    }

    /// `setuid_other_users = yes`: another user's enrolment, with xignd's limit per caller and target (5, then one
    /// every 30 s), counted here before any PIN reaches the manager.
    @Test func withTheAdministratorsConsentAnothersEnrolmentHasALimitPerCallerAndTarget() throws {
        let free = ManagerProcess.testConfig(firstLock: "300ms", maxAttempts: 30, freeAttempts: 20)
        let consenting = try PAMFixture(managerConfig: free, users: ["nobody", "root"])
        try consenting.writeConfig(pam: "setuid_other_users = yes\n")
        #expect(
            try setuidLogin("root", answers: ["24680"], in: consenting).code == PAMCode.success,
            "with consent, and the right PIN")
        for _ in 0..<5 {
            #expect(try setuidLogin("root", answers: ["13570"], in: consenting).code == PAMCode.authError)
        }
        let sixth = try setuidLogin("root", answers: [], in: consenting)
        #expect(sixth.code == PAMCode.maxTries, "\(sixth.output)")
        #expect(
            sixth.conversation.hasPrefix(
                "[ERROR_MSG] XignIn: too many PIN attempts for root from your account; try again in "))
        #expect(try consenting.failedAttempts("root@example.org") == 5, "the sixth guess never reached the manager")
        // Honest controls: the caller's own enrolment and root's own login are not limited by it.
        #expect(try setuidLogin(answers: ["24680"], in: consenting).code == PAMCode.success)
        #expect(try consenting.login("root").code == PAMCode.success)
    }

    @Test func theCallersKeyLogIsNeverWrittenOverHTTPS() throws {
        let tls = try TLSFrontEnd(to: fixture.manager.port)
        try fixture.redirectEnrolments(to: tls.url)
        try fixture.writeConfig(top: "ca_file = \(tls.caFile)\n")
        let (_, control) = try plainLogin()
        let keys = (try? String(contentsOfFile: control.file("tls-keys.log"), encoding: .utf8)) ?? ""
        #expect(
            keys.contains("CLIENT_"),
            "a host that is not setuid may log its own TLS secrets; this shows the login went over TLS")
        expectIsolated(try setuidLogin(answers: ["24680"]), code: PAMCode.success)
        expectIsolated(try setuidLogin(answers: ["13570"]), code: PAMCode.authError)
    }
}

/// The real su from util-linux (setuid root), run by a person's account. Its PAM service is replaced inside a
/// private mount namespace for the one command, so the machine's own /etc/pam.d/su stays as it is.
@Suite struct RealSuTests {
    @Test func suToAnothersEnrolmentIsRefusedBeforeAnyPINAndSuToOnesOwnLogsIn() throws {
        let user = try SSHServer.user.get()
        let fixture = try PAMFixture(users: [user, "root"])
        try fixture.allowHostsWithoutRoot()
        let service = try fixture.directory.write(
            "su-service",
            "auth required \(try PAMFixture.module) config=\(fixture.configPath) timeout=5\naccount required pam_permit.so\nsession required pam_permit.so\n",
            mode: 0o644)
        // The person at the machine, in the seat's session.
        let seat = try fixture.atSeat(user)
        func su(_ target: String) throws -> PseudoTerminal {
            let command =
                "mount --bind \(service) /etc/pam.d/su && exec /usr/bin/setpriv --reuid=\(user) --regid=\(user) --clear-groups -- /usr/bin/su \(target) -c 'echo su-as-$(id -un)'"
            return try PseudoTerminal(
                seat[0],
                Array(seat.dropFirst()) + [
                    "/usr/bin/unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", command,
                ],
                environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm"])
        }
        let other = try su("root")
        try other.expect("here you can use only your own enrolment; root must log in as themselves")
        #expect(try other.wait() != 0)
        #expect(!other.output.contains("PIN") && !other.output.contains("su-as-"), "\(other.output)")
        #expect(try fixture.failedAttempts("root@example.org") == 0, "the manager counted nothing")
        // Honest control: the same su to the caller's own account asks for the PIN and logs in.
        let own = try su(user)
        try own.expect("XignIn PIN for")
        own.send("24680\r")
        try own.expect("su-as-\(user)")
        #expect(try own.wait() == 0)
    }
}
