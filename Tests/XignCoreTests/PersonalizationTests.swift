import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignCore

/// Every PersonalizationResponse case, reached through the real manager.
@Suite struct PersonalizationTests {
    /// The core cases run with a software key and with a TPM key.
    static let keyKinds = ["software", "tpm"]

    func fixture(_ kind: String) throws -> Fixture {
        let fixture = try Fixture()
        if kind == "tpm" { fixture.tpm = try SoftwareTPM() }
        return fixture
    }

    @Test(arguments: keyKinds) func newPersonalizationGivesAnIdmIdentifierAndAnEnrolment(keyKind: String) throws {
        let fixture = try fixture(keyKind)
        let data = try fixture.register("new@example.org", alias: "Laptop")
        let result = try fixture.personalize(data)
        let entries = try fixture.sdk().store.list()
        #expect(entries == [result.entity])
        #expect(result.entity.alias == "Laptop")
        #expect(result.entity.accountEmail == "new@example.org")
        #expect(result.entity.localUser == "alice")
        #expect(result.entity.keyKind.rawValue == keyKind)
        #expect(result.entity.managerURL == fixture.manager.url)
        // The key file is named here, not after anything the manager said, and with the state is private to root.
        #expect(result.entity.keyReference.hasPrefix("key-") && result.entity.keyReference != result.idmIdentifier)
        let keyFile = fixture.directory.file(
            "state/keys/\(result.entity.keyReference).\(keyKind == "tpm" ? "tpm" : "pem")")
        #expect(try FileManager.default.attributesOfItem(atPath: keyFile)[.posixPermissions] as? Int == 0o600)
        #expect(
            try FileManager.default.attributesOfItem(atPath: fixture.directory.file("state"))[.posixPermissions] as? Int
                == 0o700)
    }

    @Test(arguments: keyKinds) func scanningFreshDataAgainGivesAlreadyPersonalizedAndOverrideReplacesTheKey(
        keyKind: String
    ) throws {
        let fixture = try fixture(keyKind)
        let first = try fixture.personalize(try fixture.register("again@example.org"))
        // The first personalization used the data up; the administrator's new data reaches the activation again.
        let data = try PersonalizationInitializationData(parsing: fixture.manager.reissue("again@example.org"))
        let personalizer = try fixture.sdk().personalizer()
        guard
            case .alreadyPersonalized(let parameters) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
        else {
            Issue.record("expected alreadyPersonalized")
            return
        }
        #expect(parameters.personalizedDeviceId == first.idmIdentifier)
        let second = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        #expect(second.idmIdentifier != first.idmIdentifier)
        #expect(try fixture.sdk().store.list().map(\.idmIdentifier) == [second.idmIdentifier])
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: fixture.directory.file("state/keys")).allSatisfy {
                $0.hasPrefix(second.entity.keyReference + ".") || $0.hasPrefix(second.entity.keyReference + "-offline-")
                    || $0 == "tpm.lockout"  // the machine's: xign took the TPM's lockout authorization
            },
            "the replaced key and its offline verifier are gone")
    }

    @Test(arguments: keyKinds) func afterALocalResetOverrideMovesTheActivationHere(keyKind: String) throws {
        let fixture = try fixture(keyKind)
        let first = try fixture.personalize(try fixture.register("reset@example.org"))
        let data = try PersonalizationInitializationData(parsing: fixture.manager.reissue("reset@example.org"))
        let fresh = fixture.directory.file("fresh-state")  // a reinstalled machine
        let personalizer = try fixture.sdk(stateDirectory: fresh).personalizer()
        guard
            case .rePersonalization(let parameters, _) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(
                    data: data, pin: "24680")
        else {
            Issue.record("expected rePersonalization")
            return
        }
        #expect(parameters.personalizedDeviceId == first.idmIdentifier)
        let moved = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        #expect(moved.entity.activationId == first.entity.activationId)
        // The old device is revoked at the manager: it can no longer get a challenge.
        let client = ManagerClient(url: fixture.manager.url, http: HTTPClient())
        #expect(throws: XignSdkError.self) {
            let _: ChallengeMessage = try client.post(
                APIPath.challenges, ChallengeRequest(deviceId: first.idmIdentifier))
        }
        let activation = try #require(try fixture.activations().first { $0["email"] as? String == "reset@example.org" })
        #expect(activation["deviceId"] as? String == moved.idmIdentifier)
    }

    /// Activation data opens its activation once: whoever holds the mail and the PIN later cannot take the account over,
    /// nor (with the mail alone) spend its PIN attempts.
    @Test func activationDataIsSingleUseExpiresAndEveryEnrolmentIsMailed() throws {
        let fixture = try Fixture()
        let data = try fixture.register("once@example.org")
        let first = try fixture.personalize(data)
        #expect(
            try fixture.manager.subjects(to: "once@example.org").last == "A device was enrolled for your XignIn account"
        )
        let elsewhere = try fixture.sdk(stateDirectory: fixture.directory.file("attacker")).personalizer()
        for pin in ["24680", "11223"] {
            do {
                _ = try elsewhere.decryptPersonalizationInitializationDataSynchronous(data: data, pin: pin)
                Issue.record("used activation data was accepted")
            } catch let error as XignSdkError {
                #expect(error.errorCode == .activationNotFound && error.message.contains("used already"), "\(error)")
            }
        }
        #expect(try fixture.activations().first?["failedAttempts"] as? Int == 0, "no PIN was checked")
        // Data that waited past its lifetime is refused the same way (its expiry set back, as a week would).
        let late = try fixture.register("late@example.org")
        _ = try fixture.manager.query("UPDATE activations SET secret_valid_until = 1 WHERE secret_valid_until > 0")
        do {
            _ = try fixture.personalize(late)
            Issue.record("expired activation data was accepted")
        } catch let error as XignSdkError {
            #expect(error.message.contains("expired"), "\(error)")
        }
        // Honest control: the administrator's new data works once, and the machine that holds the activation still logs in.
        let fresh = try PersonalizationInitializationData(parsing: fixture.manager.reissue("late@example.org"))
        _ = try fixture.personalize(fresh)
        #expect(try ApiAccessTests().isServiceLogin(fixture.sdk(), first.idmIdentifier, pin: "24680"))
    }

    @Test func afterALocalResetANewActivationLeavesTheOriginalIntact() throws {
        let fixture = try Fixture()
        let first = try fixture.personalize(try fixture.register("second@example.org"))
        let data = try PersonalizationInitializationData(parsing: fixture.manager.reissue("second@example.org"))
        let mailsBefore = try fixture.manager.mails().count
        let personalizer = try fixture.sdk(stateDirectory: fixture.directory.file("other-state")).personalizer()
        guard
            case .rePersonalization(_, let trigger) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
        else {
            Issue.record("expected rePersonalization")
            return
        }
        #expect(trigger.pinSpec.setPin("1111") == .tooShort)
        #expect(throws: XignSdkError.self) { try personalizer.personalizeIdentityManagerSynchronous(trigger: trigger) }
        try expectSetPin(trigger.pinSpec.setPin("97531"))
        #expect(trigger.setAlias("Workstation") == .valid)
        trigger.shouldSendEmail = true
        let added = try personalizer.personalizeIdentityManagerSynchronous(trigger: trigger)
        #expect(added.entity.activationId != first.entity.activationId)
        #expect(added.entity.alias == "Workstation")
        let activations = try fixture.activations().filter { $0["email"] as? String == "second@example.org" }
        #expect(activations.count == 2)
        #expect(
            activations.first { $0["id"] as? String == first.entity.activationId }?["deviceId"] as? String
                == first.idmIdentifier)
        // The backup mail carries the new activation's data, and the account is told of the new device.
        #expect(try fixture.manager.mails().count == mailsBefore + 2)
        let backup = try PersonalizationPayload(
            parsingMail: String(
                contentsOfFile: try fixture.manager.mailPath(for: "second@example.org"), encoding: .utf8))
        #expect(backup.activationId == added.entity.activationId)
    }

    @Test func anOrganizationInviteForAnotherEmailOffersAMerge() throws {
        let fixture = try Fixture()
        let existing = try fixture.personalize(try fixture.register("alice@example.org"))
        let invite = try fixture.manager.admin(["invite", "--email", "alice@acme.example", "--organization", "Acme"])
        #expect(invite.status == 0, "\(invite.stderr)")
        let pin = try #require(invite.stdout.split(separator: "\n").last?.split(separator: " ").last.map(String.init))
        let data = try PersonalizationInitializationData(
            parsing: fixture.manager.activationLink(for: "alice@acme.example"))
        let personalizer = try fixture.sdk().personalizer()
        guard
            case .mergePersonalization(let parameters, let merge) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(
                    data: data, pin: pin)
        else {
            Issue.record("expected mergePersonalization")
            return
        }
        #expect(merge.existingIdmIdentifier == existing.idmIdentifier)
        #expect(merge.existingAccountEmail == "alice@example.org")
        #expect(merge.invitedEmail == "alice@acme.example")
        #expect(merge.organization == "Acme")
        // Continuing with the parameters makes the invite an account of its own, replacing the local enrolment.
        let replaced = try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
        #expect(try fixture.sdk().store.list().map(\.accountEmail) == ["alice@acme.example"])
        #expect(replaced.entity.accountEmail == "alice@acme.example")
        let accounts = try fixture.manager.admin(["accounts", "--json"])
        let list = try JSONSerialization.jsonObject(with: Data(accounts.stdout.utf8)) as? [[String: Any]] ?? []
        #expect(list.first { $0["email"] as? String == "alice@acme.example" }?["isTemporary"] as? Bool == false)
    }

    @Test func wrongPINsEscalateTheLockoutUntilItIsPermanent() throws {
        let fixture = try Fixture()  // base delay 300 ms, doubling, permanent at the 4th failure
        let data = try fixture.register("locked@example.org")
        let personalizer = try fixture.sdk().personalizer()
        var delays: [TimeInterval] = []
        for attempt in 1...4 {
            let before = Date()
            guard
                case .lockout(let lock, let again) =
                    try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "13570")
            else {
                Issue.record("attempt \(attempt) was not a lockout")
                return
            }
            #expect(again == data)
            #expect(lock.failedAttempts == attempt)
            if attempt < 4 {
                #expect(!lock.isPermanent)
                delays.append(lock.lockedUntil.timeIntervalSince(before))
                // While the lock holds, the manager refuses even the right PIN, and charges nothing for it.
                let refusal = #expect(throws: XignSdkError.self) {
                    try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: "24680")
                }
                #expect(refusal?.errorCode == .lockedOut && refusal?.lockout != nil)
                Thread.sleep(until: lock.lockedUntil.addingTimeInterval(0.05))
            } else {
                #expect(lock.isPermanent)
            }
        }
        #expect(delays.count == 3)
        #expect(delays[1] > delays[0] && delays[2] > delays[1], "lockedUntil grows: \(delays)")
        // Permanent: the right PIN is refused, also on a machine with no memory of the lock (the manager enforces it).
        for stateDirectory in [nil, fixture.directory.file("elsewhere")] {
            do {
                _ = try fixture.sdk(stateDirectory: stateDirectory).personalizer()
                    .decryptPersonalizationInitializationDataSynchronous(
                        data: data, pin: "24680")
                Issue.record("a permanently locked activation accepted the right PIN")
            } catch let error as XignSdkError where error.lockout != nil {
                #expect(error.lockout?.isPermanent == true)
                #expect(error.message.contains("xign-setup register"))
            }
        }
    }

    @Test func aRightPINAfterAWrongOneResetsTheCounter() throws {
        let fixture = try Fixture()
        let data = try fixture.register("reset-counter@example.org")
        let personalizer = try fixture.sdk().personalizer()
        guard
            case .lockout(let lock, _) = try personalizer.decryptPersonalizationInitializationDataSynchronous(
                data: data, pin: "13570")
        else {
            Issue.record("expected a lockout")
            return
        }
        Thread.sleep(until: lock.lockedUntil.addingTimeInterval(0.05))
        guard
            case .newPersonalization = try personalizer.decryptPersonalizationInitializationDataSynchronous(
                data: data, pin: "24680")
        else {
            Issue.record("expected newPersonalization")
            return
        }
        #expect(
            try fixture.activations().first { $0["email"] as? String == "reset-counter@example.org" }?["failedAttempts"]
                as? Int == 0)
    }

    @Test func removeRevokesAtTheManagerAndForgetsLocally() throws {
        let fixture = try Fixture()
        let data = try fixture.register("gone@example.org")
        let result = try fixture.personalize(data)
        #expect(try fixture.sdk().remove(idmIdentifier: result.idmIdentifier, localOnly: false) == .revoked)
        #expect(try fixture.sdk().store.list().isEmpty)
        #expect(
            !FileManager.default.fileExists(
                atPath: fixture.directory.file("state/keys/\(result.entity.keyReference).pem")))
        do {
            _ = try fixture.sdk().personalizer().decryptPersonalizationInitializationDataSynchronous(
                data: data, pin: "24680")
            Issue.record("a revoked activation was accepted")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .activationRevoked)
        }
    }

    @Test func anActivationBelongsToOneLocalUser() throws {
        let fixture = try Fixture()
        let data = try fixture.register("shared@example.org")
        _ = try fixture.personalize(data, user: "alice")
        do {
            _ = try fixture.sdk(user: "bob").personalizer().decryptPersonalizationInitializationDataSynchronous(
                data: data, pin: "24680")
            Issue.record("bob took alice's activation")
        } catch let error as XignSdkError {
            #expect(error.message.contains("bound to the local user alice"))
        }
    }

    @Test func anOrganizationInviteMergesIntoTheExistingAccount() throws {
        let fixture = try Fixture()
        let existing = try fixture.personalize(try fixture.register("carol@example.org"))
        let invite = try fixture.manager.admin(["invite", "--email", "carol@acme.example", "--organization", "Acme"])
        let invitePIN = try #require(
            invite.stdout.split(separator: "\n").last?.split(separator: " ").last.map(String.init))
        let data = try PersonalizationInitializationData(
            parsing: fixture.manager.activationLink(for: "carol@acme.example"))
        let sdk = try fixture.sdk()
        guard
            case .mergePersonalization(_, let merge) = try sdk.personalizer()
                .decryptPersonalizationInitializationDataSynchronous(
                    data: data, pin: invitePIN)
        else {
            Issue.record("expected mergePersonalization")
            return
        }
        // Another enrolled device may not confirm this merge.
        let other = try fixture.personalize(try fixture.register("dave@example.org"), user: "dave")
        let foreign = AuthenticationInitializationDataWithSession(
            existingIdmIdentifier: other.idmIdentifier, existingAccountEmail: "dave@example.org",
            invitedEmail: merge.invitedEmail,
            organization: merge.organization, sessionId: merge.sessionId
        )
        #expect(throws: XignSdkError.self) { _ = try sdk.authenticator.startAuthenticationSynchronous(data: foreign) }

        let authenticator = sdk.authenticator
        let request = try authenticator.startAuthenticationSynchronous(data: merge)
        #expect(request.roles.map(\.name) == ["merge"])
        guard
            case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: request)
        else {
            Issue.record("expected success")
            return
        }
        try information.sign(factor: DeviceFactor())
        try information.sign(factor: PinFactor("24680"))
        guard
            case .apiAccessMergeComplete(let idmIdentifier) = try authenticator.finishMergeSynchronous(
                userInfo: information)
        else {
            Issue.record("expected apiAccessMergeComplete")
            return
        }
        #expect(idmIdentifier == existing.idmIdentifier)
        // The invite is gone: its account, its activation data, and its address is now taken.
        let accounts =
            try JSONSerialization.jsonObject(with: Data(try fixture.manager.admin(["accounts", "--json"]).stdout.utf8))
            as? [[String: Any]] ?? []
        #expect(accounts.compactMap { $0["email"] as? String }.sorted() == ["carol@example.org", "dave@example.org"])
        do {
            _ = try fixture.sdk(stateDirectory: fixture.directory.file("fresh")).personalizer()
                .decryptPersonalizationInitializationDataSynchronous(
                    data: data, pin: invitePIN)
            Issue.record("the invite still decrypts")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .activationNotFound)
        }
        let parameters = try sdk.registry.initializationSynchronous(url: fixture.manager.url)
        parameters.pinSpec.setPin("24680")
        parameters.selection?.info.email?.setValue(value: "carol@acme.example")
        guard case .failure(let rejected) = try sdk.registry.registerSynchronous(data: parameters) else {
            Issue.record("the merged address registered again")
            return
        }
        #expect(rejected.selection?.info.email?.error == .notAvailable)
    }
}
