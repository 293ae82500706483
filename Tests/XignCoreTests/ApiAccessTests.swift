import Foundation
import Synchronization
import Testing
import XignProtocol
import XignTestSupport

@testable import XignCore

/// Change PIN, new activation, delete and add factor (the SDKs' api access results) through the real manager.
@Suite struct ApiAccessTests {
    let logins = AuthenticationTests()

    func enrolled(_ fixture: Fixture, _ email: String) throws -> (XignSdk, String) {
        let result = try fixture.personalize(try fixture.register(email))
        return (try fixture.sdk(), result.idmIdentifier)
    }

    /// Confirms `process` with device and `pin`, as xign-setup does.
    func confirm(
        _ process: ApiAccessProcess, _ sdk: XignSdk, _ id: String, pin: String
    ) throws -> ApiAccessAuthenticationResult {
        try sdk.authenticator.finishApiAccessSynchronous(
            userInfo: try sdk.authenticator.signWithDeviceAndPinSynchronous(
                request: try sdk.authenticator.startApiAccessSynchronous(process, idmIdentifier: id), pin: { pin },
                incomplete: XignSdkError(.parametersIncomplete, "attributes not confirmed")))
    }

    func changePin(_ sdk: XignSdk, _ id: String, from old: String, to new: String) throws -> Int {
        guard case .apiAccessChangePin(let change) = try confirm(.changePin, sdk, id, pin: old) else {
            throw TestFailure("expected apiAccessChangePin")
        }
        try expectSetPin(change.pinSpec.setPin(new))
        return try sdk.personalizer().finishChangePin(request: change)
    }

    func isServiceLogin(_ sdk: XignSdk, _ id: String, pin: String) throws -> Bool {
        if case .serviceLogin = try logins.login(sdk, id, pin: pin).0 { return true }
        return false
    }

    @Test func aChangedPINLogsInAndTheOldOneIsAWrongPIN() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "change@example.org")
        #expect(try changePin(sdk, id, from: "24680", to: "97531") == 1)
        #expect(try isServiceLogin(sdk, id, pin: "97531"))
        guard case .lockout(let lock, _) = try logins.login(sdk, id, pin: "24680").0 else {
            Issue.record("the old PIN still logs in")
            return
        }
        #expect(lock.failedAttempts == 1)
        let audit = try fixture.manager.admin(["audit", "--json"]).stdout
        #expect(audit.contains("pinChanged"))
        #expect(!audit.contains("97531") && !audit.contains("24680"), "no PIN in the audit")
    }

    @Test func aWrongCurrentPINChargesTheLockoutAndChangesNothing() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "wrongold@example.org")
        guard case .lockout(let lock, _) = try confirm(.changePin, sdk, id, pin: "11223") else {
            Issue.record("a wrong current PIN opened the PIN change")
            return
        }
        #expect(lock.failedAttempts == 1 && !lock.isPermanent)
        #expect(try fixture.activations().first?["failedAttempts"] as? Int == 1)
        Thread.sleep(until: lock.lockedUntil.addingTimeInterval(0.05))
        #expect(try isServiceLogin(sdk, id, pin: "24680"), "the PIN is unchanged")
    }

    @Test func theNewPINHoldsForEveryDeviceOfTheAccountAndMeetsThePolicy() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "twopin@example.org")
        let (second, secondId, _) = try newActivation(fixture, sdk, id, pin: "25814")
        guard case .apiAccessChangePin(let change) = try confirm(.changePin, sdk, id, pin: "24680") else {
            Issue.record("expected apiAccessChangePin")
            return
        }
        #expect(change.pinSpec.setPin("56789") == .sequence)
        #expect(change.pinSpec.setPin("77777") == .similarDigits)
        #expect(throws: XignSdkError.self) { _ = try sdk.personalizer().finishChangePin(request: change) }
        try expectSetPin(change.pinSpec.setPin("86420"))
        #expect(try sdk.personalizer().finishChangePin(request: change) == 2)
        #expect(try isServiceLogin(second, secondId, pin: "86420"))
        #expect(try isServiceLogin(sdk, id, pin: "86420"))
    }

    @Test func aGrantIsSpentOnceEvenInParallelAndIsNoAuthorizationCode() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "grant@example.org")
        guard case .apiAccessChangePin(let change) = try confirm(.changePin, sdk, id, pin: "24680") else {
            Issue.record("expected apiAccessChangePin")
            return
        }
        let code = AuthorizationCode(code: change.grant.message.grant, idmIdentifier: id)
        let data = try sdk.authenticator.fetchInAppAuthenticationInitializationData(
            idmIdentifier: id, service: "change-pin", host: "h", localUser: "alice")
        #expect(throws: XignSdkError.self) { _ = try sdk.authenticator.fetchToken(code, expecting: data) }
        // The refusal rolled back: the grant still finishes its own process, once.
        try expectSetPin(change.pinSpec.setPin("97531"))
        #expect(try sdk.personalizer().finishChangePin(request: change) == 1)
        #expect(throws: XignSdkError.self) { _ = try sdk.personalizer().finishChangePin(request: change) }

        guard case .apiAccessChangePin(let again) = try confirm(.changePin, sdk, id, pin: "97531") else {
            Issue.record("expected apiAccessChangePin")
            return
        }
        try expectSetPin(again.pinSpec.setPin("86420"))
        let successes = Mutex(0)
        // Each thread its own SDK, all with the one grant: the manager must spend it once.
        nonisolated(unsafe) let shared = again
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            if (try? fixture.sdk().personalizer().finishChangePin(request: shared)) != nil {
                successes.withLock { $0 += 1 }
            }
        }
        #expect(successes.withLock { $0 } == 1)
        #expect(try isServiceLogin(sdk, id, pin: "86420"))
    }

    /// Requests a new activation on `sdk` and personalizes it in a second state directory.
    func newActivation(
        _ fixture: Fixture, _ sdk: XignSdk, _ id: String, pin: String, mail: Bool = false
    ) throws -> (XignSdk, String, NewActivationData) {
        guard
            case .apiAccessRequestNewActivationData(let trigger) = try confirm(
                .requestNewActivation, sdk, id, pin: "24680")
        else {
            throw TestFailure("expected apiAccessRequestNewActivationData")
        }
        try expectSetPin(trigger.pinSpec.setPin(pin))
        #expect(trigger.setAlias("Second laptop") == .valid)
        trigger.shouldSendEmail = mail
        let made = try sdk.personalizer().finishRequestNewActivationData(request: trigger)
        let state = fixture.directory.file("second-\(made.activationId.prefix(8))")
        let second = try fixture.sdk(stateDirectory: state)
        let data = try PersonalizationInitializationData(parsing: made.payload.deepLink)
        guard
            case .newPersonalization(let parameters) = try second.personalizer()
                .decryptPersonalizationInitializationDataSynchronous(
                    data: data, pin: pin)
        else {
            throw TestFailure("expected newPersonalization of the new activation")
        }
        #expect(parameters.activationAlias == "Second laptop")
        return (
            second,
            try second.personalizer().personalizeIdentityManagerSynchronous(parameters: parameters).idmIdentifier, made
        )
    }

    @Test func aNewActivationPersonalizesASecondMachineAndTheFirstKeepsWorking() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "second@example.org")
        let firstLink = try fixture.manager.activationLink(for: "second@example.org")
        let (second, secondId, made) = try newActivation(fixture, sdk, id, pin: "25814", mail: true)
        #expect(made.mailQueued)
        let mailed = try PersonalizationPayload(parsing: try fixture.manager.activationLink(for: "second@example.org"))
        #expect(
            mailed.activationId == made.activationId && mailed.deepLink != firstLink,
            "the mail carries the new activation's own data")
        #expect(try isServiceLogin(second, secondId, pin: "25814"))
        #expect(try isServiceLogin(sdk, id, pin: "24680"))
        let devices = try sdk.accountDevices(idmIdentifier: id)
        #expect(Set(devices.map(\.deviceId)) == [id, secondId])
        #expect(
            devices.allSatisfy { $0.lastUsedAt != nil && $0.keyKind == .software && $0.factors == [.device, .pin] })
        #expect(devices.map(\.activationAlias).contains("Second laptop"))
    }

    @Test func aDeletionEndsEveryDeviceAndKeepsTheAuditUnderAPseudonym() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "gone@example.org")
        let (second, secondId, _) = try newActivation(fixture, sdk, id, pin: "25814", mail: true)
        #expect(try isServiceLogin(second, secondId, pin: "25814"))
        guard case .apiAccessDelete(let deletion) = try confirm(.delete, sdk, id, pin: "24680") else {
            Issue.record("expected apiAccessDelete")
            return
        }
        #expect(try sdk.personalizer().finishDeletion(request: deletion) == 2)
        #expect(try sdk.store.list().isEmpty, "this machine forgot the enrolment")
        #expect(try FileManager.default.contentsOfDirectory(atPath: sdk.store.keyDirectory).isEmpty, "and its key")
        do {
            _ = try logins.login(second, secondId, pin: "25814")
            Issue.record("the other machine still logs in")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .deviceNotEnrolled)
            #expect(error.message.contains("not enrolled"))
        }
        #expect(throws: XignSdkError.self) { _ = try logins.login(sdk, id, pin: "24680") }
        for table in [
            "accounts", "activations", "devices", "account_emails", "authentications", "personalization_sessions",
            "mail_queue",
        ] {
            #expect(
                try fixture.manager.query("SELECT COUNT(*) FROM \(table)") == ["0"],
                "\(table) holds a row of the deleted account")
        }
        // Its audit stays (an attacker with device and PIN cannot erase the record of their attempts), under a
        // keyed hash of the address, the deletion last.
        let audit = try fixture.manager.query("SELECT event, email FROM audit_events ORDER BY at")
        let pseudonyms = Set(audit.map { $0.split(separator: "|").last.map(String.init) ?? "" })
        #expect(
            audit.first?.hasPrefix("accountCreated|") == true && audit.last?.hasPrefix("accountDeleted|") == true,
            "\(audit)")
        #expect(pseudonyms.count == 1 && pseudonyms.first?.hasPrefix("deleted-") == true, "\(audit)")
    }

    @Test func aFingerprintIsAddedAsAFactorAndARoleThatAsksForItChecksIt() throws {
        let reader = try FingerprintDaemon()
        let fixture = try Fixture(
            managerConfig: ManagerProcess.testConfig(
                pamService: "roles = login, strong", "role.login.authenticators = device+pin",
                "role.strong.authenticators = device+pin+biometric"))
        fixture.adjust = { $0.fingerprintReader = reader.reader() }
        let (sdk, id) = try enrolled(fixture, "factor@example.org")
        func addFactor() throws -> [AuthenticatorType] {
            guard case .apiAccessAddFactor(let add) = try confirm(.addFactor, sdk, id, pin: "24680") else {
                throw TestFailure("expected apiAccessAddFactor")
            }
            return try sdk.personalizer().finishAddBiometricFactor(request: add) { _ in }
        }
        do {
            _ = try addFactor()
            Issue.record("a factor was added without an enrolled finger")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .biometricUnavailable && error.message.contains("fprintd-enroll alice"))
        }
        #expect(
            try fixture.activations().first?["factors"] as? [String] == ["device", "pin"], "nothing reached the manager"
        )

        try reader.enrol(user: "alice", finger: "alice-right")
        reader.scanLater("mallory")
        #expect(throws: XignSdkError.self) { _ = try addFactor() }
        reader.scanLater("alice-right")
        #expect(try addFactor() == [.device, .pin, .biometric])
        #expect(try sdk.entity(id).addedFactors == [.biometric])
        #expect(try fixture.activations().first?["factors"] as? [String] == ["device", "pin", "biometric"])
        #expect(try sdk.accountDevices(idmIdentifier: id).first?.factors == [.device, .pin, .biometric])

        func strongLogin(finger: String) throws -> LoginAuthenticationResult {
            let request = try sdk.authenticator.startAuthenticationSynchronous(
                data: try sdk.authenticator.fetchInAppAuthenticationInitializationData(
                    idmIdentifier: id, service: "pam", host: "h", localUser: "alice"))
            guard let strong = request.roles.first(where: { $0.name == "strong" }) else {
                throw TestFailure("no role strong")
            }
            #expect(strong.requestedAuthenticators == [[.device, .pin, .biometric]])
            request.setSelection(strong)
            guard
                case .success(let information) = try sdk.authenticator.prepareAuthenticationUserInformationSynchronous(
                    request: request)
            else {
                throw TestFailure("attributes not confirmed")
            }
            try information.sign(factor: DeviceFactor())
            try information.sign(factor: PinFactor("24680"))
            reader.scanLater(finger)
            var prompts: [String] = []
            try information.sign(factor: BiometricFactor { prompts.append($0) })
            #expect(prompts.first == "Touch the fingerprint reader.")
            return try sdk.authenticator.finishAuthenticationSynchronous(userInfo: information)
        }
        guard case .serviceLogin = try strongLogin(finger: "alice-right") else {
            Issue.record("the right finger did not log in")
            return
        }
        do {
            _ = try strongLogin(finger: "mallory")
            Issue.record("another finger logged in")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .biometricMismatch)
        }
        #expect(
            try fixture.activations().first?["failedAttempts"] as? Int == 0,
            "a wrong finger is refused here and costs no PIN attempt")
    }

    /// The finger factor is bound to the fingers enrolled when it was added (Nevis's invalidateOnNewOsBiometrics): a second
    /// finger, or the same finger deleted and enrolled again, removes it at the next login, before any finger is read or
    /// PIN is checked; a login with the PIN and add-factor bind it again. Unchanged, it passes.
    @Test func changedFingerEnrolmentRemovesTheFactorUntilItIsAddedAgain() throws {
        let reader = try FingerprintDaemon()
        let fixture = try Fixture(
            managerConfig: ManagerProcess.testConfig(
                pamService: "roles = login, strong", "role.login.authenticators = device+pin",
                "role.strong.authenticators = device+pin+biometric"))
        fixture.adjust = { $0.fingerprintReader = reader.reader() }
        let (sdk, id) = try enrolled(fixture, "bound@example.org")
        try reader.enrol(user: "alice", finger: "alice-right")
        func addFactor() throws {
            guard case .apiAccessAddFactor(let add) = try confirm(.addFactor, sdk, id, pin: "24680") else {
                throw TestFailure("expected apiAccessAddFactor")
            }
            reader.scanLater("alice-right")
            _ = try sdk.personalizer().finishAddBiometricFactor(request: add) { _ in }
        }
        func strongLogin(touching: Bool = true) throws -> (LoginAuthenticationResult, prompts: [String]) {
            let request = try sdk.authenticator.startAuthenticationSynchronous(
                data: try sdk.authenticator.fetchInAppAuthenticationInitializationData(
                    idmIdentifier: id, service: "pam", host: "h", localUser: "alice"))
            guard let strong = request.roles.first(where: { $0.name == "strong" }) else {
                throw TestFailure("no role strong")
            }
            request.setSelection(strong)
            guard
                case .success(let information) = try sdk.authenticator.prepareAuthenticationUserInformationSynchronous(
                    request: request)
            else {
                throw TestFailure("attributes not confirmed")
            }
            try information.sign(factor: DeviceFactor())
            try information.sign(factor: PinFactor("24680"))
            var prompts: [String] = []
            if touching { reader.scanLater("alice-right") }
            try information.sign(factor: BiometricFactor { prompts.append($0) })
            #expect(touching || prompts.isEmpty, "no finger is asked for once the enrolment changed")
            return (try sdk.authenticator.finishAuthenticationSynchronous(userInfo: information), prompts)
        }
        func expectRemoved(_ what: Comment) throws {
            do {
                _ = try strongLogin(touching: false)
                Issue.record("the finger still counted after \(what)")
            } catch let error as XignSdkError {
                #expect(
                    error.errorCode == .biometricInvalidated && error.message.contains("add-factor biometric"),
                    "\(error)")
            }
            #expect(
                try fixture.activations().first?["factors"] as? [String] == ["device", "pin"],
                "the manager removed the factor")
            #expect(
                try sdk.entity(id).addedFactors == [] && sdk.entity(id).biometricEnrolment == nil,
                "this machine forgot it too")
            #expect(try fixture.activations().first?["failedAttempts"] as? Int == 0, "no PIN attempt was spent")
            #expect(try isServiceLogin(sdk, id, pin: "24680"), "the PIN alone still logs in where the role allows it")
        }

        try addFactor()
        let recorded = try #require(try sdk.entity(id).biometricEnrolment)
        #expect(recorded.count == 43)
        let control = try strongLogin()
        guard case .serviceLogin = control.0 else { throw TestFailure("the unchanged enrolment did not log in") }
        #expect(control.prompts.first == "Touch the fingerprint reader.")

        try reader.enrol(user: "alice", finger: "mallory", as: "left-index-finger")
        try expectRemoved("a second finger was enrolled")
        let audit = try fixture.manager.query(
            "SELECT event, service, detail FROM audit_events WHERE event = 'biometricInvalidated'")
        #expect(audit.count == 1 && audit.first?.contains("enrolled fingers of alice changed") == true, "\(audit)")

        try reader.deleteFingers(of: "alice")
        try reader.enrol(user: "alice", finger: "alice-right")
        try addFactor()
        #expect(try sdk.entity(id).biometricEnrolment != recorded)
        guard case .serviceLogin = try strongLogin().0 else {
            throw TestFailure("the factor added again did not log in")
        }

        try reader.deleteFingers(of: "alice")
        try reader.enrol(user: "alice", finger: "alice-right")
        try expectRemoved("the same finger was deleted and enrolled again")
        #expect(
            try fixture.manager.query("SELECT event FROM audit_events WHERE event = 'biometricInvalidated'").count == 2)
    }

    /// fprintd's prints and the recorded digest are root's: a user who is not root can read neither, nor write the
    /// record, and the manager holds its own copy, which the finish is checked against.
    @Test func aUserWhoIsNotRootCanNeitherReadNorForgeTheFingerEnrolment() throws {
        let reader = try FingerprintDaemon()
        let fixture = try Fixture(
            managerConfig: ManagerProcess.testConfig(
                pamService: "roles = strong", "role.strong.authenticators = device+pin+biometric"))
        fixture.adjust = { $0.fingerprintReader = reader.reader() }
        let (sdk, id) = try enrolled(fixture, "secret@example.org")
        try reader.enrol(user: "alice", finger: "alice-right")
        guard case .apiAccessAddFactor(let add) = try confirm(.addFactor, sdk, id, pin: "24680") else {
            throw TestFailure("expected addFactor")
        }
        reader.scanLater("alice-right")
        _ = try sdk.personalizer().finishAddBiometricFactor(request: add) { _ in }
        let state = fixture.directory.file("state") + "/identity-managers.json"
        // The test's own directories let anyone pass, so only the files' and fprintd's own modes stand in the way.
        for directory in [fixture.directory.path, reader.directory.path] { #expect(chmod(directory, 0o711) == 0) }
        for path in [state, reader.printsDirectory + "/alice"] {
            let read = try ChildProcess(
                "/usr/bin/setpriv",
                ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "/usr/bin/ls", "-R", path],
                in: fixture.directory
            )
            .wait(timeout: 10)
            #expect(
                read.status != 0 && read.stderr.contains("Permission denied"), "nobody read \(path): \(read.stdout)")
        }
        let forge = try ChildProcess(
            "/usr/bin/setpriv", ["--reuid=nobody", "--regid=nogroup", "--clear-groups", "--", "/usr/bin/touch", state],
            in: fixture.directory
        ).wait(timeout: 10)
        #expect(forge.status != 0, "nobody could write the enrolments")
        let controlRead = try ChildProcess(
            "/usr/bin/ls", ["-R", reader.printsDirectory + "/alice"], in: fixture.directory
        ).wait(timeout: 10)
        #expect(
            controlRead.status == 0 && controlRead.stdout.split(separator: "\n").count > 2,
            "root reads it: \(controlRead.stdout)")
        // Root on this machine could edit the local record; the manager's copy still decides.
        let recorded = try #require(try sdk.entity(id).biometricEnrolment)
        #expect(try fixture.manager.query("SELECT biometric_enrolment FROM devices").first == recorded)
    }

    /// A login whose verifier is being upgraded (the hash cost went up) races a PIN change: the login's verdict is about
    /// the old PIN, so it may not land after the change, and the old PIN must not come back.
    @Test func aPINChangeRacingALoginWhoseVerifierUpgradesKeepsTheNewPIN() throws {
        let fixture = try Fixture()
        let (sdk, id) = try enrolled(fixture, "race@example.org")
        guard case .apiAccessChangePin(let change) = try confirm(.changePin, sdk, id, pin: "24680") else {
            throw TestFailure("expected apiAccessChangePin")
        }
        try expectSetPin(change.pinSpec.setPin("97531"))
        // The cost goes up: the next right PIN is hashed again the new way (seconds), which opens the window.
        let config = try String(contentsOfFile: fixture.manager.configPath, encoding: .utf8)
        try writeTestFile(
            fixture.manager.configPath,
            Data(config.replacingOccurrences(of: "hash_iterations = 2000", with: "hash_iterations = 5000000").utf8))
        fixture.manager.stop()
        try fixture.manager.start()
        nonisolated(unsafe) let (slowSDK, pending) = (try fixture.sdk(timeout: 30_000), change)
        let changed = Thread.detachedResult { () -> Int in
            // Busy while the login holds its claim; the grant is not spent, so the same change is sent again.
            for _ in 0..<5 {
                if let count = try? slowSDK.personalizer().finishChangePin(request: pending) { return count }
                Thread.sleep(forTimeInterval: 0.5)
            }
            return try slowSDK.personalizer().finishChangePin(request: pending)
        }
        Thread.sleep(forTimeInterval: 0.3)
        // Its outcome depends on where it fell in the race (a login, a conflict, or a wrong PIN after the change);
        // what must hold is the state after both.
        _ = Result { try logins.login(slowSDK, id, pin: "24680").0 }
        #expect(try changed.value(timeout: 60) == 1, "the change went through")
        // A login that fell after the change was a wrong PIN; its short lock ends first.
        let lockedUntil = try fixture.activations().first?["lockedUntil"] as? Double ?? 0
        Thread.sleep(until: Date(timeIntervalSince1970: lockedUntil / 1000 + 0.05))
        #expect(try isServiceLogin(slowSDK, id, pin: "97531"), "the new PIN holds")
        guard case .lockout = try logins.login(slowSDK, id, pin: "24680").0 else {
            Issue.record("the old PIN came back")
            return
        }
    }
}
