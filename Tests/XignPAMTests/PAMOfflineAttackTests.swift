import Foundation
import Testing
import XignTestSupport

/// Offline login against the attackers of docs/security.md's G1, G2 and G4: root on a stolen laptop, a clock set
/// to stretch the grace, and a user who makes their own sudo lose the manager. Each refusal beside its control.
@Suite struct PAMOfflineAttackTests {
    static let notPossible =
        "[ERROR_MSG] XignIn: the identity manager cannot be reached, and offline login is not possible now; connect to the network and log in once."

    static func doctor(_ fixture: PAMFixture) throws -> String {
        let result = try ChildProcess(
            try Products.path("xign-setup"), ["doctor", "--pam-dir", fixture.confdir, "--config", fixture.configPath],
            in: fixture.directory
        ).wait()
        return result.stdout + result.stderr
    }

    /// G1: once xign set the lockout authorization and forgot it, root has no way to reset the TPM's count of wrong
    /// PINs or to switch the protection off, with the empty authorization every Linux TPM starts with.
    @Test func rootCannotLiftTheTPMsCountOnceXignTookTheLockout() throws {
        let (fixture, tpm) = try PAMOfflineLoginTests.fixture()
        #expect(try Self.doctor(fixture).contains("lockout authorization set (tpm_lockout = take)"))
        fixture.manager.stop()
        // Control: offline login as designed.
        #expect(try fixture.login().code == PAMCode.success)
        #expect(try fixture.login(answers: ["13570"]).code == PAMCode.authError)
        #expect(try tpm.lockoutCounter() == 1)
        #expect(throws: TestFailure.self) { try tpm.tool("tpm2_dictionarylockout", ["--clear-lockout"]) }
        #expect(throws: TestFailure.self) {
            try tpm.tool("tpm2_dictionarylockout", ["--setup-parameters", "--recovery-time=0"])
        }
        #expect(try tpm.lockoutCounter() == 1, "the wrong PIN stays counted")
        #expect(try fixture.login().code == PAMCode.success, "and the TPM still checks PINs")
    }

    /// G1: where the administrator has not allowed xign to take an empty lockout authorization, no verifier is made
    /// and doctor says why; allowed, the next online login makes one.
    @Test func anEmptyLockoutThatXignMayNotTakeMeansNoOfflineLogin() throws {
        let tpm = try SoftwareTPM()
        try tpm.countFailuresStrictly()
        let fixture = try PAMFixture(tpm: tpm, tpmLockout: .leave)
        #expect(try fixture.login().code == PAMCode.success)
        #expect(try PAMOfflineLoginTests.record(fixture)["verifier"] == nil)
        let doctor = try Self.doctor(fixture)
        #expect(doctor.contains("lockout authorization empty"), "\(doctor)")
        #expect(doctor.contains("set tpm_lockout = take in xign.conf"), "\(doctor)")
        try PAMOfflineLoginTests.expectNoOfflineLogin(fixture)
        #expect(try tpm.lockoutCounter() == 0)
        // Control: allowed, the next online login takes it and makes the verifier.
        try fixture.setTPMLockout(.take)
        try fixture.manager.start()
        #expect(try fixture.login().code == PAMCode.success)
        fixture.manager.stop()
        #expect(try fixture.login().code == PAMCode.success)
    }

    /// G2: the grace is bound into the verifier's policy on the TPM's Clock. Whatever the wall clock says (set back
    /// to within the grace, or a day before the last login), the TPM refuses once its Clock has run the grace, and
    /// no date is said before the PIN.
    @Test func theTPMsClockEndsTheGraceWhateverTheWallClockSays() throws {
        let (fixture, tpm) = try PAMOfflineLoginTests.fixture()
        fixture.manager.stop()
        // Control: six days on, on both clocks, within the seven-day grace.
        try tpm.advanceClock(byMilliseconds: 6 * 86_400_000)
        #expect(try fixture.login(wrapper: FakeClock.command("+6d")).code == PAMCode.success)
        try tpm.advanceClock(byMilliseconds: 2 * 86_400_000)
        for wall in [[], FakeClock.command("+6d"), FakeClock.command("-1d")] {
            let login = try fixture.login(answers: [], wrapper: wall)
            #expect(login.code == PAMCode.authInfoUnavailable, "\(wall): \(login.conversation)")
            #expect(login.conversation == Self.notPossible, "\(wall): no PIN asked, no date said")
        }
        #expect(try tpm.lockoutCounter() == 0)
        // Root edits the state file: a later deadline and a fresh last login. The TPM holds the policy it was made
        // with, so the PIN is never checked.
        try PAMOfflineLoginTests.editOfflineRecords(fixture) { record in
            var verifier = try #require(record["verifier"] as? [String: Any])
            verifier["deadline"] = (verifier["deadline"] as? UInt64 ?? 0) + 30 * 86_400_000
            record["verifier"] = verifier
            record["lastOnlineAt"] = Int64(Date().timeIntervalSince1970 * 1000)
        }
        let edited = try fixture.login()
        #expect(edited.code != PAMCode.success, "\(edited.conversation)")
        #expect(try tpm.lockoutCounter() == 0, "no PIN reached the authorization check")
        // Control: an online login makes a verifier for a new grace (past the ten minutes in which one that changes
        // nothing else writes nothing, since the edit named the present as the last login).
        let later = FakeClock.command("+15m")
        try fixture.manager.start()
        #expect(try fixture.login(wrapper: later).code == PAMCode.success)
        fixture.manager.stop()
        #expect(try fixture.login(wrapper: later).code == PAMCode.success)
    }

    /// G4: offline login checks the PIN only, so a role that asks for more (a finger) is never logged in offline, nor
    /// one whose requirements this machine has not seen online; the control, the login role, is.
    @Test func aRoleThatNeedsAFingerIsNeverLoggedInOffline() throws {
        let config = ManagerProcess.testConfig(
            pamService: "roles = login, sudo", "role.login.authenticators = device+pin",
            "role.sudo.authenticators = device+pin+biometric")
        let (fixture, tpm) = try PAMOfflineLoginTests.fixture(managerConfig: config)
        let online = try fixture.login(service: "sudo", answers: [], wrapper: try fixture.atSeat("root"))
        #expect(
            online.code != PAMCode.success && online.conversation.contains("needs device+pin+biometric"),
            "\(online.conversation)")
        fixture.manager.stop()
        let offline = try fixture.login(service: "sudo", answers: [], wrapper: try fixture.atSeat("root"))
        #expect(offline.code == PAMCode.authInfoUnavailable, "\(offline.conversation)")
        #expect(
            offline.conversation == "[ERROR_MSG] XignIn: the identity manager cannot be reached.",
            "no PIN asked: \(offline.conversation)")
        #expect(try tpm.lockoutCounter() == 0)
        #expect(try fixture.login().code == PAMCode.success, "control: the login role offline")
    }

    /// G4: the real sudo, run by its user. Starved of descriptors (ulimit -n 8) with the manager up, or stopped by its
    /// caller past the timeout, it never logs in offline and charges nothing to the TPM. Controls: the same sudo with
    /// the network logs in online, and the same machine at its console without the network logs in offline.
    @Test func sudoThatItsUserStarvesOrStopsNeverGoesOffline() throws {
        let user = try SSHServer.user.get()
        let tpm = try SoftwareTPM()
        try tpm.countFailuresStrictly()
        let fixture = try PAMFixture(users: [user], tpm: tpm)
        #expect(try fixture.login(user).code == PAMCode.success, "online once at the console")
        chmod(fixture.directory.path, 0o711)
        let pam =
            "auth required \(try PAMFixture.module) config=\(fixture.configPath) timeout=3\naccount required pam_permit.so\nsession required pam_permit.so\n"
        try RealSudo.withService(for: user, pamLines: pam, defaults: ["passwd_tries=1"]) {
            // The user at the machine, in a terminal of the seat's session.
            let seat = try fixture.atSeat(user)
            func sudo(_ shell: String = "") throws -> PseudoTerminal {
                try RealSudo.run(as: user, in: seat, before: shell)
            }
            // Control: with the network, sudo logs in online.
            let online = try sudo()
            _ = try online.expect("PIN for")
            online.send("24680\n")
            _ = try online.expect("\nroot")
            #expect(try online.wait() == 0)

            // With the manager up and too few descriptors, the module gets to no answer (libcurl's socket, or the TPM's
            // first): sudo's one try fails, and nothing goes offline.
            for limit in [8, 9] {
                let starved = try sudo("ulimit -n \(limit);")
                #expect(try starved.wait() != 0, "\(starved.output)")
                #expect(
                    starved.output.contains("1 incorrect password attempt"),
                    "PAM's auth ran and refused: \(starved.output)")
                #expect(!starved.output.contains("offline"), "\(starved.output)")
            }

            // A stand-in holds the manager's answers 2 s; the caller stops sudo meanwhile, for longer than the timeout.
            let slow = try FaultyServer.delaying(2, to: fixture.manager.port)
            try fixture.redirectEnrolments(to: slow.url)
            let stopped = try sudo()
            // Stopped while the module waits for the manager's first answer.
            let asked = Date().addingTimeInterval(20)
            while slow.requests.isEmpty && Date() < asked { usleep(10_000) }
            let pids = try ChildProcess(
                "/usr/bin/pgrep", ["-u", "0", "-f", "^/usr/bin/sudo -k /usr/bin/id"], in: fixture.directory
            ).wait().stdout
            for pid in pids.split(separator: "\n").compactMap({ pid_t($0) }) { kill(pid, SIGSTOP) }
            Thread.sleep(forTimeInterval: 6)
            for pid in pids.split(separator: "\n").compactMap({ pid_t($0) }) { kill(pid, SIGCONT) }
            kill(stopped.pid, SIGCONT)  // runuser stops itself when its child stops, as su does
            #expect(!pids.isEmpty)
            #expect(try stopped.wait() != 0, "\(stopped.output)")
            #expect(stopped.output.contains("1 incorrect password attempt"), "\(stopped.output)")
            #expect(!stopped.output.contains("offline"), "\(stopped.output)")
            #expect(try tpm.lockoutCounter() == 0, "nothing was charged to the TPM")
            withExtendedLifetime(slow) {}

            // Control: at the console, without the network, the same enrolment logs in offline.
            fixture.manager.stop()
            let console = try fixture.login(user)
            #expect(console.code == PAMCode.success, "\(console.conversation)")
            #expect(console.conversation.contains("offline login"))
        }
    }
}
