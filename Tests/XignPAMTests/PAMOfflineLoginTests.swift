import Foundation
import Testing
import XignCore
import XignDevice
import XignTestSupport

/// Offline login with real parts: swtpm holds the PIN verifier, the real manager is stopped and started, libpam loads
/// the module. Each refusal has its control beside it.
@Suite struct PAMOfflineLoginTests {
    /// A TPM-key enrolment that logged in online once, with failures the TPM keeps for the whole test.
    static func fixture(managerConfig: String = ManagerProcess.testConfig) throws -> (PAMFixture, SoftwareTPM) {
        let tpm = try SoftwareTPM()
        // Before personalization: xign then takes the lockout authorization, and nobody can change them.
        try tpm.countFailuresStrictly()
        let fixture = try PAMFixture(managerConfig: managerConfig, tpm: tpm)
        let online = try fixture.login()
        guard online.code == PAMCode.success else {
            throw TestFailure("the online login failed: \(online.conversation)")
        }
        return (fixture, tpm)
    }

    /// The enrolment's offline record in the state file.
    static func record(_ fixture: PAMFixture) throws -> [String: Any] {
        let data = try Data(contentsOf: URL(fileURLWithPath: fixture.state + "/identity-managers.json"))
        let contents = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        let records = contents?["offline"] as? [String: [String: Any]]
        return records?.values.first ?? [:]
    }

    static func localFailures(_ fixture: PAMFixture) throws -> Int { try record(fixture)["failures"] as? Int ?? -1 }

    /// With the manager gone, the login ends as it did before offline login existed.
    /// `told`: the user hears that offline login is not possible now (it may be again after an online login); else
    /// it is not offered at all here, and the login ends as an unreachable manager does.
    static func expectNoOfflineLogin(
        _ fixture: PAMFixture, told: Bool = false, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        fixture.manager.stop()
        let login = try fixture.login(answers: [])
        #expect(login.code == PAMCode.authInfoUnavailable, sourceLocation: sourceLocation)
        #expect(
            login.conversation
                == (told
                    ? PAMOfflineAttackTests.notPossible
                    : "[ERROR_MSG] XignIn: the identity manager cannot be reached."),
            sourceLocation: sourceLocation)
    }

    /// Root's edit of the offline records in the state file, as on a stolen laptop.
    static func editOfflineRecords(_ fixture: PAMFixture, _ edit: (inout [String: Any]) throws -> Void) throws {
        let path = fixture.state + "/identity-managers.json"
        var contents = try #require(
            try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path))) as? [String: Any])
        var records = try #require(contents["offline"] as? [String: [String: Any]])
        for (id, var record) in records {
            try edit(&record)
            records[id] = record
        }
        contents["offline"] = records
        try writeTestFile(path, try JSONSerialization.data(withJSONObject: contents), mode: 0o600)
    }

    static let offlineNotice =
        "[TEXT_INFO] XignIn: the identity manager cannot be reached; this machine's TPM checks your PIN (offline login)."

    @Test func theTPMChecksThePINOfflineAndCountsEveryWrongOne() throws {
        let (fixture, tpm) = try Self.fixture()
        fixture.manager.stop()
        let offline = try fixture.login()
        #expect(offline.code == PAMCode.success, "\(offline.conversation)")
        #expect(
            offline.conversation.hasPrefix(Self.offlineNotice + "\n[PROMPT_ECHO_OFF] XignIn PIN for alice's laptop: "),
            "\(offline.conversation)")
        #expect(
            offline.conversation.contains(
                "[TEXT_INFO] XignIn: logged in offline. Offline login is possible until <TIME> (6 day(s))"))
        #expect(try Self.localFailures(fixture) == 0)
        #expect(try tpm.lockoutCounter() == 0, "a right PIN costs the TPM nothing")

        let wrong = try fixture.login(answers: ["13570"])
        #expect(wrong.code == PAMCode.authError)
        #expect(
            wrong.conversation.hasSuffix(
                "[ERROR_MSG] Wrong PIN. 4 more wrong PIN(s) end offline login until you log in online."),
            "\(wrong.conversation)")
        #expect(try Self.localFailures(fixture) == 1, "counted here")
        #expect(try tpm.lockoutCounter() == 1, "and by the TPM")
        #expect(wrong.threadsBefore == wrong.threadsAfter)

        // Back online: the report charges the wrong PIN to the activation's lockout and audits both logins.
        try fixture.manager.start()
        let back = try fixture.login(answers: [])
        #expect(
            back.code == PAMCode.maxTries,
            "the offline failure locked the activation for its first delay: \(back.conversation)")
        #expect(try fixture.failedAttempts("alice@example.org") == 1)
        let audit = try fixture.manager.admin(["audit"]).stdout
        #expect(audit.contains("offlineLogin"), "\(audit)")
        #expect(audit.contains("wrong offline PIN"), "\(audit)")
        Thread.sleep(
            until: Date(
                timeIntervalSince1970: (try fixture.activation("alice@example.org")["lockedUntil"] as? Double ?? 0)
                    / 1000 + 0.05))
        try PAMModuleTests().forgetLocalLockouts(fixture)
        let online = try fixture.login()
        #expect(online.code == PAMCode.success, "\(online.conversation)")
        #expect(!online.conversation.contains("offline"))
        #expect(try fixture.failedAttempts("alice@example.org") == 0)
        let record = try Self.record(fixture)
        #expect((record["events"] as? [Any])?.isEmpty == true, "acknowledged events are dropped: \(record)")
        #expect(record["failures"] as? Int == 0)
        // The report was charged once, though it was sent with two starts.
        #expect(audit.components(separatedBy: "wrong offline PIN").count == 2)
    }

    /// What `xign-setup doctor` and `list` tell the administrator: until when, and the TPM's own bounds.
    @Test func doctorAndListShowWhetherOfflineLoginIsPossible() throws {
        let (fixture, tpm) = try Self.fixture()
        func setup(_ arguments: [String]) throws -> String {
            let result = try ChildProcess(
                try Products.path("xign-setup"), arguments + ["--config", fixture.configPath], in: fixture.directory
            ).wait()
            return result.stdout + result.stderr
        }
        let doctor = try setup(["doctor", "--pam-dir", fixture.confdir])
        #expect(doctor.contains("0 failure(s) counted of 32 allowed, one forgiven every 3600 s"), "\(doctor)")
        #expect(doctor.contains("offline login possible until"), "\(doctor)")
        #expect(doctor.contains("5 wrong PIN(s) left"))
        #expect(try setup(["list"]).contains("offline login possible until"))
        fixture.manager.stop()
        _ = try fixture.login(answers: ["13570"])
        #expect(try setup(["doctor", "--pam-dir", fixture.confdir]).contains("1 failure(s) counted of 32 allowed"))
        #expect(try setup(["list"]).contains("4 wrong PIN(s) left"))
        _ = tpm
    }

    @Test func offlineLoginEndsAfterTheAllowedWrongPINsUntilAnOnlineLogin() throws {
        let (fixture, tpm) = try Self.fixture()
        #expect(
            try fixture.manager.admin(["accounts", "set-offline", "alice@example.org", "--max-failures", "2"]).status
                == 0)
        #expect(try fixture.login().code == PAMCode.success, "the policy arrives with the next online login")
        fixture.manager.stop()
        #expect(try fixture.login(answers: ["13570"]).code == PAMCode.authError)
        let last = try fixture.login(answers: ["13571"])
        #expect(last.code == PAMCode.maxTries)
        #expect(
            last.conversation.hasSuffix(
                "[ERROR_MSG] Wrong PIN. Offline login has ended; connect to the network and log in once."))
        let refused = try fixture.login(answers: [])
        #expect(refused.code == PAMCode.authInfoUnavailable)
        #expect(
            refused.conversation
                == "[ERROR_MSG] XignIn: the identity manager cannot be reached, and offline login ended after 2 wrong offline PIN(s); connect to the network and log in once."
        )
        #expect(try tpm.lockoutCounter() == 2, "the refused attempt never reached the TPM")
        // Control: an online login ends it.
        try fixture.manager.start()
        Thread.sleep(
            until: Date(
                timeIntervalSince1970: (try fixture.activation("alice@example.org")["lockedUntil"] as? Double ?? 0)
                    / 1000 + 0.05))
        _ = try fixture.login(answers: [])  // reports, and is refused by the lock the two wrong PINs left
        Thread.sleep(
            until: Date(
                timeIntervalSince1970: (try fixture.activation("alice@example.org")["lockedUntil"] as? Double ?? 0)
                    / 1000 + 0.05))
        try PAMModuleTests().forgetLocalLockouts(fixture)
        #expect(try fixture.login().code == PAMCode.success)
        fixture.manager.stop()
        #expect(try fixture.login().code == PAMCode.success, "offline again after an online login")
    }

    /// Eight wrong PINs at once against five allowed: each attempt is counted under the state file's lock before the
    /// TPM sees it, so no more than five reach the TPM.
    @Test func parallelWrongPINsDoNotGetPastTheAllowedNumber() throws {
        let (fixture, tpm) = try Self.fixture()
        fixture.manager.stop()
        let logins = try (0..<8).map { _ in try fixture.startLogin(answers: ["13570"]) }
        // A login that starts after the fifth failure was counted is refused before it asks for a PIN, so which three
        // leave their answer unused is the race's to decide; the counts below are what is checked.
        let codes = try logins.map { try fixture.finish($0, unusedAnswersAllowed: true).code }
        #expect(codes.filter { $0 == PAMCode.authError || $0 == PAMCode.maxTries }.count == 5, "\(codes)")
        #expect(codes.filter { $0 == PAMCode.authInfoUnavailable }.count == 3, "\(codes)")
        #expect(try tpm.lockoutCounter() == 5)
        #expect(try Self.localFailures(fixture) == 5)
        #expect(
            try fixture.login(answers: []).code == PAMCode.authInfoUnavailable,
            "offline login has ended, even for the right PIN")
    }

    /// A state directory that cannot take the attempt's count (a full disk): the TPM is not asked, so nothing can be
    /// guessed uncounted, and the user is told why.
    @Test func aFullDiskStopsTheAttemptBeforeTheTPM() throws {
        let (fixture, tpm) = try Self.fixture()
        fixture.manager.stop()
        // A private mount namespace in which the state directory is a copy on a full tmpfs.
        let full = fixture.directory.file("full")
        try FileManager.default.createDirectory(atPath: full, withIntermediateDirectories: true)
        let script = """
            mount -t tmpfs -o size=512k none "\(full)" && cp -a "\(fixture.state)/." "\(full)/" \
              && { dd if=/dev/zero of="\(full)/filler" bs=4k 2>/dev/null; true; } && mount --bind "\(full)" "\(fixture.state)" && exec "$0" "$@"
            """
        let login = try fixture.login(
            answers: ["13570"],
            wrapper: ["/usr/bin/unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", script])
        #expect(login.code == PAMCode.serviceError, "\(login.conversation)")
        #expect(login.conversation.contains("cannot save the xign state"), "\(login.conversation)")
        #expect(try tpm.lockoutCounter() == 0, "the TPM never saw the PIN")
        // Control: with room, the same wrong PIN reaches the TPM and is counted.
        #expect(try fixture.login(answers: ["13570"]).code == PAMCode.authError)
        #expect(try tpm.lockoutCounter() == 1)
    }

    @Test func pastTheGraceOfflineLoginSaysToConnect() throws {
        let (fixture, _) = try Self.fixture()
        fixture.manager.stop()
        let late = try fixture.login(answers: [], wrapper: FakeClock.command("+8d"))
        #expect(late.code == PAMCode.authInfoUnavailable)
        #expect(
            late.conversation == PAMOfflineAttackTests.notPossible,
            "no PIN asked, and no date said before one: \(late.conversation)")
        // Control: within the grace.
        #expect(try fixture.login(wrapper: FakeClock.command("+6d")).code == PAMCode.success)
        // A clock set back before the last online login does not stretch the grace.
        let behind = try fixture.login(answers: [], wrapper: FakeClock.command("-2d"))
        #expect(behind.code == PAMCode.authInfoUnavailable)
        #expect(behind.conversation == PAMOfflineAttackTests.notPossible)
    }

    /// H3: after a power cut the TPM's Clock may show less than it did; offline login waits until the TPM trusts its
    /// Clock again (past the value it last saved), says only that it is not possible now, and charges nothing.
    /// Control: a clean reboot.
    @Test func afterAPowerCutOfflineLoginWaitsForTheTPMsClock() throws {
        let (fixture, tpm) = try Self.fixture()
        fixture.manager.stop()
        try tpm.reboot()
        #expect(try fixture.login().code == PAMCode.success, "control: a clean reboot")
        try tpm.cutPower()
        let refused = try fixture.login(answers: [])
        #expect(refused.code == PAMCode.authInfoUnavailable, "\(refused.output)")
        #expect(refused.conversation == PAMOfflineAttackTests.notPossible, "\(refused.conversation)")
        #expect(try Self.localFailures(fixture) == 0)
        try tpm.advanceClock(byMilliseconds: 1 << 22)
        #expect(try fixture.login().code == PAMCode.success, "the Clock is safe again")
    }

    /// H3: a verifier of the older kind (before every use of it went through its policy) is not used offline; the next
    /// online login makes one of the current kind, and offline login works again.
    @Test func aVerifierOfTheOlderKindIsReplacedAtTheNextOnlineLogin() throws {
        let (fixture, _) = try Self.fixture()
        try Self.editOfflineRecords(fixture) { record in
            var verifier = try #require(record["verifier"] as? [String: Any])
            #expect(verifier.removeValue(forKey: "kind") as? Int == 2)
            record["verifier"] = verifier
        }
        fixture.manager.stop()
        let refused = try fixture.login(answers: [])
        #expect(refused.code == PAMCode.authInfoUnavailable, "\(refused.output)")
        #expect(refused.conversation == PAMOfflineAttackTests.notPossible, "\(refused.conversation)")
        #expect(try PAMOfflineAttackTests.doctor(fixture).contains("offline login not ready on this machine yet"))
        try fixture.manager.start()
        #expect(try fixture.login().code == PAMCode.success, "online")
        #expect((try Self.record(fixture)["verifier"] as? [String: Any])?["kind"] as? Int == 2)
        fixture.manager.stop()
        #expect(try fixture.login().code == PAMCode.success, "offline again")
    }

    @Test func aPINChangedElsewhereEndsOfflineLoginAtTheNextContact() throws {
        let (fixture, _) = try Self.fixture()
        // Another machine of the account changes the PIN (a copy of this state, so the same device signs there).
        let other = try fixture.copyState()
        try other.changePIN(from: "24680", to: "97531")
        // Control: before this machine hears of it, the old PIN still works offline.
        fixture.manager.stop()
        #expect(try fixture.login().code == PAMCode.success)
        try fixture.manager.start()
        // Any contact tells it: here a login with the old PIN, which the manager refuses.
        #expect(try fixture.login().code == PAMCode.authError)
        #expect(try Self.record(fixture)["verifier"] == nil, "the verifier of the old PIN is gone")
        try Self.expectNoOfflineLogin(fixture, told: true)
    }

    @Test func aDeviceRevokedAtTheManagerCannotLogInOfflineAfterTheNextContact() throws {
        let (fixture, _) = try Self.fixture()
        try fixture.copyState().revokeAtManager()
        #expect(try fixture.login(answers: []).code == PAMCode.authError, "the manager no longer knows the device")
        #expect(try Self.record(fixture).isEmpty, "the offline record and verifier went with it")
        try Self.expectNoOfflineLogin(fixture)
    }

    @Test func theStateCopiedToAnotherTPMTestsNoPIN() throws {
        let (fixture, _) = try Self.fixture()
        fixture.manager.stop()
        let thief = try SoftwareTPM()
        try thief.countFailuresStrictly()
        try fixture.useTPM(thief)
        let stolen = try fixture.login(answers: [])
        #expect(stolen.code != PAMCode.success)
        #expect(!stolen.conversation.contains("PROMPT"), "\(stolen.conversation)")
        #expect(try thief.lockoutCounter() == 0)
        // With the lockout authorization set there too, the TPM is asked, and the verifier does not load in it.
        try thief.tool("tpm2_changeauth", ["-c", "lockout", "thief"])
        try fixture.setTPMLockout(.organization)
        let asked = try fixture.login()
        #expect(asked.code != PAMCode.success)
        #expect(
            asked.conversation.contains("the TPM was cleared, so this machine's device key is gone"),
            "\(asked.conversation)")
        #expect(try thief.lockoutCounter() == 0)
        #expect(try Self.localFailures(fixture) == 0, "an attempt the TPM did not judge is not counted")
    }

    /// duo_unix #391: a server that offers no certificate (an anonymous cipher) is a stand-in that answers, never a
    /// manager that is gone.
    @Test(arguments: [
        "garbled signature", "an answer that is not HTTP", "certificate from another CA",
        "no certificate (anonymous cipher)", "a busy answer",
    ])
    func aStandInThatAnswersNeverLeadsToOfflineLogin(_ fault: String) throws {
        let tpm = try SoftwareTPM()
        let (fixture, certificates, files) = try PAMTLSTests.fixture(tpm: tpm)
        #expect(try fixture.login().code == PAMCode.success)
        // H7: a 503 busy is unsigned, and anyone on the path can send one.
        let busy = #"{"error":{"code":"busy","message":"cannot reach a writable database"}}"#
        let answers = [
            "garbled signature":
                "HTTP/1.1 200 OK\r\nContent-Type: application/jwt\r\nContent-Length: 11\r\n\r\neyJ.garbled",
            "an answer that is not HTTP": "SSH-2.0-OpenSSH_9.2\r\n",
            "a busy answer":
                "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: \(busy.utf8.count)\r\n\r\n\(busy)",
        ]
        var standIn: FaultyServer?
        var anonymous: AnonymousTLSServer?
        if let answer = answers[fault] {
            standIn = try FaultyServer { _ in Array(answer.utf8) }
            try fixture.redirectEnrolments(to: standIn!.url)
        } else if fault.hasPrefix("no certificate") {
            anonymous = try AnonymousTLSServer()
            try fixture.redirectEnrolments(to: anonymous!.url)
        } else {
            try PAMTLSTests.reload(fixture, certificates.fromOtherCA, in: files)
        }
        let login = try fixture.login(answers: [])
        #expect(login.code != PAMCode.success, "\(login.conversation)")
        #expect(!login.conversation.contains("offline"), "\(login.conversation)")
        if fault == "a busy answer" {
            #expect(login.conversation.contains("the identity manager is busy"), "\(login.conversation)")
        }
        if let anonymous {
            #expect(login.conversation.contains("TLS failed"), "\(login.conversation)")
            #expect(anonymous.log.contains("no shared cipher"), "the module reached it and refused: \(anonymous.log)")
        }
        // Control: the manager truly gone is offline login.
        fixture.manager.stop()
        if let standIn { withExtendedLifetime(standIn) {} }
        try fixture.redirectEnrolments(
            to: "https://127.0.0.1:9", from: standIn?.url ?? anonymous?.url ?? fixture.manager.url.description)
        #expect(try fixture.login().code == PAMCode.success)
        withExtendedLifetime(files) {}
    }

    /// H7: a local user who holds every connection the manager allows one address (three here, 64 by default) has the
    /// manager refuse the others from this machine. It answers them 503 busy before it closes, so no login takes it
    /// for gone and goes offline. Control: with the connections let go the login is online again, and with the
    /// manager gone it is offline.
    @Test func aUserHoldingTheConnectionCapSendsNoLoginOffline() throws {
        let (fixture, _) = try Self.fixture(
            managerConfig: ManagerProcess.testConfig.replacingOccurrences(
                of: "[limits]\n", with: "[limits]\nconnections_per_address = 3\n"))
        let held = (0..<3).compactMap { _ in LoopbackSocket.connect(fixture.manager.port) }
        #expect(held.count == 3)
        // The manager counts a connection once it has taken it, which a busy machine delays: the login goes only once
        // a fourth connection is answered busy (curl's, which then closes).
        let capped = try waitUntil(seconds: 20) {
            try ChildProcess(
                "/usr/bin/curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", "\(fixture.manager.url)/health"],
                in: fixture.directory
            ).wait().stdout == "503"
        }
        #expect(capped, "the manager never counted the three held connections")
        let refused = try fixture.login(answers: [])
        held.forEach { close($0) }
        #expect(refused.code == PAMCode.authInfoUnavailable, "\(refused.output)")
        #expect(
            refused.conversation == "[ERROR_MSG] XignIn: the identity manager is busy; try again in a moment.",
            "\(refused.conversation)")
        #expect(try Self.localFailures(fixture) == 0)
        #expect(try fixture.login().conversation.hasPrefix("[PROMPT_ECHO_OFF] XignIn PIN for"), "control: online")
        fixture.manager.stop()
        #expect(try fixture.login().conversation.contains("offline login"), "control: the manager gone")
    }

    @Test func aSoftwareKeyIsNeverOfferedOfflineLogin() throws {
        let fixture = try PAMFixture()
        #expect(try fixture.login().code == PAMCode.success)
        let record = try Self.record(fixture)
        #expect(record.isEmpty, "no verifier, no record: \(record)")
        try Self.expectNoOfflineLogin(fixture)
    }

    @Test func offlineNeverInXignConfKeepsTheLoginOnline() throws {
        let (fixture, _) = try Self.fixture()
        fixture.manager.stop()
        #expect(try fixture.login().code == PAMCode.success, "control: offline = auto, the default")
        try fixture.writeConfig(top: "offline = never\n")
        #expect(
            try fixture.login(answers: []).conversation == "[ERROR_MSG] XignIn: the identity manager cannot be reached."
        )
    }
}

/// Another machine that holds this one's enrolment: a copy of the state directory, on the same TPM.
struct CopiedMachine {
    let sdk: XignSdk
    let id: String

    func changePIN(from old: String, to new: String) throws {
        guard try sdk.changePIN(of: id, from: old, to: new) == 1 else { throw TestFailure("the PIN change failed") }
    }

    func revokeAtManager() throws {
        guard try sdk.remove(idmIdentifier: id, localOnly: false) == .revoked else {
            throw TestFailure("the device was not revoked")
        }
    }
}

extension PAMFixture {
    func copyState() throws -> CopiedMachine {
        let copy = directory.file("state-copy-\(UUID().uuidString)")
        try FileManager.default.copyItem(atPath: state, toPath: copy)
        var configuration = configuration
        configuration.stateDirectory = copy
        let sdk = try XignSdk(configuration: configuration, localUser: "alice")
        return CopiedMachine(sdk: sdk, id: try #require(try sdk.store.list().first?.idmIdentifier))
    }

    /// `tpm_lockout` in xign.conf.
    func setTPMLockout(_ policy: TPMLockoutPolicy) throws {
        let text = try String(contentsOfFile: configPath, encoding: .utf8)
        let line = try #require(text.split(separator: "\n").first { $0.hasPrefix("tpm_lockout = ") })
        try writeTestFile(
            configPath, Data(text.replacingOccurrences(of: line, with: "tpm_lockout = \(policy.rawValue)").utf8))
    }

    /// Points xign.conf at another TPM, as a disk moved into another machine finds it.
    func useTPM(_ other: SoftwareTPM) throws {
        let text = try String(contentsOfFile: configPath, encoding: .utf8)
        try writeTestFile(
            configPath, Data(text.replacingOccurrences(of: try #require(tpm).tcti, with: other.tcti).utf8))
    }
}
