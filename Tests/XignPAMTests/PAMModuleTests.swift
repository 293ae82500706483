import Foundation
import Testing
import XignCore
import XignCrypto
import XignProtocol
import XignTestSupport

/// pam_xign.so as libpam loads it: built by `make pam`, driven through pam_start_confdir against the real manager.
@Suite struct PAMModuleTests {
    /// The core logins run with a software key and with a TPM key.
    static let keyKinds = ["software", "tpm"]

    func fixture(_ kind: String) throws -> PAMFixture {
        try PAMFixture(tpm: kind == "tpm" ? try SoftwareTPM() : nil)
    }

    @Test(arguments: keyKinds) func theRightPINLogsIn(keyKind: String) throws {
        let fixture = try fixture(keyKind)
        let login = try fixture.login()
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(login.conversation == (try PAMFixture.golden("success")))
        #expect(login.threadsBefore == login.threadsAfter, "pam_authenticate left threads behind")
        // login keeps its terminal as stderr: libtss2 wrote an error there for the SRK it looked for first.
        #expect(login.errors.isEmpty, "the login wrote to its host's stderr: \(login.errors)")
    }

    @Test func aTPMKeyLogsInAndAClearedTPMSaysToEnrollAgain() throws {
        let tpm = try SoftwareTPM()
        let fixture = try PAMFixture(tpm: tpm)
        let login = try fixture.login()
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(login.conversation == (try PAMFixture.golden("success")))
        #expect(try fixture.login(answers: ["13570"]).conversation == (try PAMFixture.golden("wrong-pin")))
        Thread.sleep(
            until: Date(
                timeIntervalSince1970: (try fixture.activation("alice@example.org")["lockedUntil"] as? Double ?? 0)
                    / 1000 + 0.05))
        try forgetLocalLockouts(fixture)
        try tpm.clear()
        // The key is loaded to sign the start, so a cleared TPM is told before any PIN is asked.
        let cleared = try fixture.login(answers: [])
        #expect(cleared.code == PAMCode.authError)
        #expect(cleared.conversation == (try PAMFixture.golden("tpm-cleared")))
        tpm.stop()
        let gone = try fixture.login(answers: [])
        #expect(gone.code == PAMCode.authInfoUnavailable, "no TPM: the login cannot be checked now")
        #expect(gone.conversation.contains("no TPM is available"))
    }

    @Test(arguments: keyKinds) func aWrongPINFailsAndCountsTowardTheLockout(keyKind: String) throws {
        let fixture = try fixture(keyKind)
        let login = try fixture.login(answers: ["13570"])
        #expect(login.code == PAMCode.authError)
        #expect(login.conversation == (try PAMFixture.golden("wrong-pin")))
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 1)
        #expect(login.threadsBefore == login.threadsAfter)
    }

    @Test(arguments: keyKinds) func aLockedUserSeesUntilWhenAndGetsMaxTries(keyKind: String) throws {
        let fixture = try fixture(keyKind)
        _ = try fixture.login(answers: ["13570"])
        let locked = try fixture.login(answers: [])
        #expect(locked.code == PAMCode.maxTries)
        #expect(locked.conversation == (try PAMFixture.golden("locked")))
    }

    @Test func aPermanentLockPointsToXignSetup() throws {
        let fixture = try PAMFixture()  // permanent at the 4th failure
        for _ in 1...4 {
            // Wait out each lock; the machine remembers it too, so forget it locally to let the next guess through.
            Thread.sleep(
                until: Date(
                    timeIntervalSince1970: (try fixture.activation("alice@example.org")["lockedUntil"] as? Double ?? 0)
                        / 1000 + 0.05))
            try forgetLocalLockouts(fixture)
            _ = try fixture.login(answers: ["13570"])
        }
        let login = try fixture.login(answers: [])
        #expect(login.code == PAMCode.maxTries)
        #expect(login.conversation == (try PAMFixture.golden("locked-permanently")))
    }

    /// Clears the lockouts the machine remembers, leaving the enrolment.
    func forgetLocalLockouts(_ fixture: PAMFixture) throws {
        let path = fixture.state + "/identity-managers.json"
        var contents =
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any]
            ?? [:]
        contents["pendingLockouts"] = [String: Any]()
        try writeTestFile(path, try JSONSerialization.data(withJSONObject: contents))
    }

    @Test func anUnknownUserIsUnknownOrIgnored() throws {
        let fixture = try PAMFixture()
        // With pam_permit after it, an ignored line leaves the decision to the rest of the stack.
        try fixture.service("login", arguments: "", then: "auth required pam_permit.so")
        #expect(try fixture.login("bob", answers: []).code == PAMCode.userUnknown)
        try fixture.service("login", arguments: "ignore_unknown_user", then: "auth required pam_permit.so")
        #expect(try fixture.login("bob", answers: []).code == PAMCode.success)
        #expect(
            try fixture.login("alice", answers: ["13570"]).code == PAMCode.authError, "known users are still checked")
    }

    @Test func anUnreachableManagerIsAuthInfoUnavailableWithinTheTimeout() throws {
        let fixture = try PAMFixture()
        fixture.manager.stop()
        let stopped = try fixture.login(answers: [])
        #expect(stopped.code == PAMCode.authInfoUnavailable)
        #expect(stopped.conversation == "[ERROR_MSG] XignIn: the identity manager cannot be reached.")
        // A manager that accepts and never answers: the module gives up after timeout= seconds.
        let silent = try FaultyServer { _ in nil }
        let path = fixture.state + "/identity-managers.json"
        let stored = try String(contentsOfFile: path, encoding: .utf8)
        try writeTestFile(
            path, Data(stored.replacingOccurrences(of: fixture.manager.url.description, with: silent.url).utf8))
        try fixture.service("login", arguments: "timeout=1")
        let started = Date()
        #expect(try fixture.login(answers: []).code == PAMCode.authInfoUnavailable)
        #expect(Date().timeIntervalSince(started) < 10, "the login must not hang past its timeout")
        try fixture.service("login", arguments: "timeout=1 failmode=safe", then: "auth required pam_permit.so")
        #expect(
            try fixture.login(answers: []).code == PAMCode.success,
            "failmode=safe leaves the decision to the rest of the stack")
    }

    /// What the config and the key say decides who logs in, so only files nobody but root could have written count
    /// (pam-u2f's open_safely): a group-writable or user-owned file is refused with what to run, before any PIN.
    @Test func aConfigOrKeyOthersCouldWriteIsRefusedWithTheFix() throws {
        let fixture = try PAMFixture()
        let config = fixture.configPath
        let nobody = try #require(getpwnam("nobody")).pointee.pw_uid
        func refusal() throws -> PAMFixture.Login {
            let login = try fixture.login(answers: [])
            #expect(login.code == PAMCode.serviceError, "\(login.output)")
            return login
        }
        chmod(config, 0o664)
        #expect(
            try refusal().conversation
                == "[ERROR_MSG] XignIn: refused the config file: \(config) can be written by its group or others; run: chmod go-w \(config). Ask your administrator."
        )
        chmod(config, 0o644)
        chown(config, nobody, 0)
        #expect(
            try refusal().conversation
                == "[ERROR_MSG] XignIn: refused the config file: \(config) is owned by uid \(nobody), not root; run: chown root: \(config). Ask your administrator."
        )
        let link = fixture.directory.file("linked.conf")
        chown(config, 0, 0)
        symlink(config, link)
        try fixture.service("login", arguments: "timeout=3 config=\(link)")
        #expect(try refusal().conversation.contains("\(link) is a symbolic link"))
        // Control: the same file, root's and 0644, logs in.
        try fixture.service("login", arguments: "timeout=3")
        #expect(try fixture.login().code == PAMCode.success)

        let keys = fixture.state + "/keys"
        let key = try #require(try FileManager.default.contentsOfDirectory(atPath: keys).first { $0.hasPrefix("key-") })
        chmod(keys + "/" + key, 0o660)
        let refused = try fixture.login(answers: [])
        #expect(refused.code == PAMCode.authError)
        #expect(
            refused.conversation.contains(
                "is not a regular file that only root writes; run: chown root: \(keys)/\(key); chmod 0600"),
            "\(refused.output)")
        #expect(try fixture.failedAttempts("alice@example.org") == 0, "refused before any PIN reached the manager")
        chmod(keys + "/" + key, 0o600)
        #expect(try fixture.login().code == PAMCode.success)
    }

    /// PAM_SILENT (sudo's default): why a login failed goes to the log only, as pam_faillock does; prompts stay.
    @Test func underPAMSilentOnlyPromptsAreShown() throws {
        let fixture = try PAMFixture()
        let silent = try fixture.login(answers: ["13579"], items: ["silent"])
        #expect(silent.code == PAMCode.authError)
        #expect(silent.conversation == "[PROMPT_ECHO_OFF] XignIn PIN for alice's laptop: ")
        // Control: without the flag the same wrong PIN says so.
        Thread.sleep(forTimeInterval: 0.5)
        let told = try fixture.login(answers: ["13579"])
        #expect(told.conversation.contains("[ERROR_MSG] Wrong PIN. XignIn is locked until"), "\(told.output)")
    }

    @Test func badArgumentsAndConfigAreServiceErrors() throws {
        let fixture = try PAMFixture()
        for arguments in [
            "timeout=0", "failmode=maybe", "nonsense", "config=relative.conf", "role=", "gdm_json=", "gdm_json=16",
            "gdm_json=-1",
        ] {
            try fixture.service("login", arguments: arguments)
            #expect(try fixture.login(answers: []).code == PAMCode.serviceError, "\(arguments)")
        }
        let broken = try fixture.directory.write("broken.conf", "state_dir = /x\ntimeout = soon\n")
        _ = try fixture.directory.write(
            "pam.d/login", "auth required \(try PAMFixture.module) config=\(broken)\n", mode: 0o644)
        #expect(try fixture.login(answers: []).code == PAMCode.serviceError)
    }

    @Test func aFailedConversationIsAConversationError() throws {
        let fixture = try PAMFixture()
        let login = try fixture.login(answers: [])
        #expect(login.code == PAMCode.conversationError)
        #expect(try fixture.activation("alice@example.org")["failedAttempts"] as? Int == 0, "no PIN, no guess")
    }

    @Test func sudoCanDemandMoreThanLogin() throws {
        let config = ManagerProcess.testConfig(
            pamService: "roles = login, sudo", "role.login.authenticators = device+pin",
            "role.sudo.authenticators = device+pin+biometric")
        let fixture = try PAMFixture(managerConfig: config)
        #expect(try fixture.login(service: "login").code == PAMCode.success)
        let sudo = try fixture.login(service: "sudo", answers: [], wrapper: try fixture.atSeat("root"))
        #expect(sudo.code == PAMCode.authError)
        #expect(sudo.conversation == (try PAMFixture.golden("sudo-needs-biometric")))
        // role= picks the role explicitly.
        try fixture.service("sudo", arguments: "role=login")
        #expect(try fixture.login(service: "sudo", wrapper: try fixture.atSeat("root")).code == PAMCode.success)
    }

    /// After add-factor, sudo's device+pin+biometric asks for the PIN, then for a finger on fprintd's reader.
    @Test func sudoWithAFingerprintAfterTheFactorWasAdded() throws {
        let reader = try FingerprintDaemon()
        let config = ManagerProcess.testConfig(
            pamService: "roles = login, sudo", "role.login.authenticators = device+pin",
            "role.sudo.authenticators = device+pin+biometric")
        let fixture = try PAMFixture(managerConfig: config, fingerprints: reader)
        try reader.enrol(user: "alice", finger: "alice-right")
        try fixture.addFingerFactor(user: "alice", finger: "alice-right", reader: reader)

        reader.scanLater("alice-right")
        let sudo = try fixture.login(service: "sudo", wrapper: try fixture.atSeat("root"))
        #expect(sudo.code == PAMCode.success)
        #expect(sudo.conversation == (try PAMFixture.golden("sudo-with-fingerprint")))
        reader.scanLater("mallory")
        let other = try fixture.login(service: "sudo", wrapper: try fixture.atSeat("root"))
        #expect(other.code == PAMCode.authError)
        #expect(other.conversation == (try PAMFixture.golden("sudo-wrong-finger")))
        #expect(try fixture.login(service: "login").code == PAMCode.success, "login still asks for device and PIN only")

        // Someone at the unlocked session enrols their own finger for alice: hers no longer counts, and nobody is asked to touch.
        try reader.enrol(user: "alice", finger: "mallory", as: "left-middle-finger")
        let changed = try fixture.login(service: "sudo", wrapper: try fixture.atSeat("root"))
        #expect(changed.code == PAMCode.authError)
        #expect(changed.conversation == (try PAMFixture.golden("sudo-fingers-changed")))
        #expect(
            try fixture.manager.query("SELECT service FROM audit_events WHERE event = 'biometricInvalidated'").count
                == 1)
    }

    @Test func aManagerAnswerWithABadSignatureIsRefused() throws {
        let fixture = try PAMFixture()
        let attacker = try P256PrivateKey()
        let forger = try FaultyServer { request in
            let nonce =
                (try? JSONDecoder().decode(
                    AuthenticationStartRequest.self,
                    from: Data(request[request.range(of: "\r\n\r\n")!.upperBound...].utf8)
                )
                .nonce) ?? ""
            let start = AuthenticationStartMessage(
                nonce: nonce, authenticationId: "0123456789abcdef0123456789abcdef", challenge: "c",
                expiresAt: Int64.max / 2,
                purpose: .login(service: "pam"), relyingPartyName: "x",
                roles: [RoleMessage(name: "login", requestedAuthenticators: [[.device, .pin]])], attributes: []
            )
            let header = JWS.Header(typ: SignedAnswerType.authenticationStart, kid: attacker.publicKey.fingerprint)
            return FaultyServer.http(
                contentType: "application/jose",
                body: Array(
                    ((try? JWS.sign(payload: JSONEncoder().encode(start), header: header, with: attacker)) ?? "").utf8))
        }
        let path = fixture.state + "/identity-managers.json"
        let stored = try String(contentsOfFile: path, encoding: .utf8)
        try writeTestFile(
            path, Data(stored.replacingOccurrences(of: fixture.manager.url.description, with: forger.url).utf8))
        let login = try fixture.login(answers: [])
        #expect(login.code == PAMCode.authError)
        #expect(login.conversation.isEmpty, "no PIN is asked for a forged answer")
    }

    @Test func itLoadsAndLogsInWithTheSwiftToolchainHidden() throws {
        let fixture = try PAMFixture()
        // A private mount namespace where /opt/swift (the toolchain and its runtime) is an empty tmpfs.
        let script = "mount -t tmpfs none /opt/swift && test ! -e /opt/swift/usr && exec \"$0\" \"$@\""
        let login = try fixture.login(wrapper: [
            "/usr/bin/unshare", "--mount", "--map-root-user", "--", "/bin/sh", "-c", script,
        ])
        #expect(login.code == PAMCode.success, "\(login.output)")
    }

    @Test func pamtesterUnderPAMWrapperAuthenticates() throws {
        let fixture = try PAMFixture()
        let good = try fixture.pamtester(["-v", "-I", "tty=tty1", "login", "alice", "authenticate"], stdin: "24680\n")
        #expect(good.status == 0, "\(good.stdout) \(good.stderr)")
        #expect(
            good.stderr.contains("successfully authenticated") || good.stdout.contains("successfully authenticated"))
        let bad = try fixture.pamtester(["-v", "-I", "tty=tty1", "login", "alice", "authenticate"], stdin: "13570\n")
        #expect(bad.status != 0)
        #expect((bad.stdout + bad.stderr).contains("Wrong PIN"))
    }

    @Test func eachLoginLogsOneLineWithResultServiceUserRuserAndRhostButNeverThePIN() throws {
        let fixture = try PAMFixture()
        // sudo with pam_rhost names this machine itself, which is a login at the machine (another host would be remote).
        let host = ProcessInfo.processInfo.hostName.split(separator: ".").first.map(String.init) ?? "localhost"
        let arguments = ["-v", "-I", "ruser=bob", "-I", "rhost=\(host)", "sudo", "alice", "authenticate"]
        let wrong = try fixture.pamtester(
            arguments, stdin: "13570\n", debugLevel: 3, session: try fixture.atSeat("root"))
        let lines = wrong.stderr.split(separator: "\n").filter { $0.contains("SYSLOG(") }
        #expect(
            lines.contains {
                $0.hasSuffix("SYSLOG(4): result=wrong-pin service=sudo user=alice ruser=bob rhost=\(host)")
            }, "\(lines)")
        #expect(!(wrong.stdout + wrong.stderr).contains("13570"), "the PIN must not be logged")
        let right = try fixture.pamtester(
            arguments, stdin: "24680\n", debugLevel: 3, session: try fixture.atSeat("root"))
        #expect(
            right.stderr.contains("SYSLOG(4): result=locked service=sudo user=alice ruser=bob rhost=\(host)"),
            "\(right.stderr)")
    }
}

/// The built .so is self-contained and exports only the PAM entry points (docs/design.md, "The PAM host").
@Suite struct PAMModuleBuildTests {
    let directory = TemporaryDirectory()

    func tool(_ path: String, _ arguments: [String]) throws -> String {
        let result = try ChildProcess(path, arguments, in: directory).wait()
        guard result.status == 0 else { throw TestFailure("\(path) failed: \(result.stderr)") }
        return result.stdout
    }

    @Test func onlyThePAMEntryPointsAreExported() throws {
        let symbols = try tool("/usr/bin/nm", ["-D", "--defined-only", try PAMFixture.module]).split(separator: "\n")
            .compactMap {
                $0.split(separator: " ").last.map(String.init)
            }
        #expect(
            symbols.sorted() == [
                "pam_sm_acct_mgmt", "pam_sm_authenticate", "pam_sm_close_session", "pam_sm_open_session",
                "pam_sm_setcred",
            ])
    }

    @Test func itNeedsNoSwiftRuntimeAndHasNoRPATHAndStaysLoaded() throws {
        let dynamic = try tool("/usr/bin/readelf", ["-d", try PAMFixture.module])
        let needed = dynamic.split(separator: "\n").filter { $0.contains("(NEEDED)") }
        #expect(!needed.isEmpty)
        #expect(
            !needed.contains { $0.contains("libswift") || $0.contains("Foundation") || $0.contains("dispatch") },
            "\(needed)")
        #expect(!dynamic.contains("RPATH") && !dynamic.contains("RUNPATH"))
        #expect(dynamic.contains("NODELETE") && dynamic.contains("BIND_NOW"))
        #expect(try tool("/usr/bin/readelf", ["-lW", try PAMFixture.module]).contains("GNU_RELRO"))
    }
}
