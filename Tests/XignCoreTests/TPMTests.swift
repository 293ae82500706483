import Foundation
import Testing
import XignCrypto
import XignDevice
import XignProtocol
import XignTestSupport

@testable import XignCore

/// Device keys in a TPM (swtpm, one per test), through the real manager.
@Suite struct TPMTests {
    func fixture(managerConfig: String = ManagerProcess.testConfig) throws -> (Fixture, SoftwareTPM) {
        let fixture = try Fixture(managerConfig: managerConfig)
        let tpm = try SoftwareTPM()
        fixture.tpm = tpm
        return (fixture, tpm)
    }

    /// A whole login with the enrolment's key; returns the token or throws the SDK error.
    func login(_ sdk: XignSdk, _ id: String) throws -> LoginToken {
        let authenticator = sdk.authenticator
        let data = try authenticator.fetchInAppAuthenticationInitializationData(
            idmIdentifier: id, service: "pam", host: "h", localUser: "alice")
        let request = try authenticator.startAuthenticationSynchronous(data: data)
        request.setSelection(request.roles[0])
        guard
            case .success(let information) = try authenticator.prepareAuthenticationUserInformationSynchronous(
                request: request)
        else {
            throw TestFailure("prepare")
        }
        try information.sign(factor: DeviceFactor())
        try information.sign(factor: PinFactor("24680"))
        guard case .serviceLogin(let result) = try authenticator.finishAuthenticationSynchronous(userInfo: information)
        else {
            throw TestFailure("not a login")
        }
        return try authenticator.fetchToken(try authenticator.fetchAuthorizationCode(result), expecting: data)
    }

    func keyFile(_ fixture: Fixture, _ result: PersonalizationResult) -> String {
        fixture.directory.file("state/keys/\(result.entity.keyReference).tpm")
    }

    @Test func personalizeWithATPMKeyAndLogIn() throws {
        let (fixture, _) = try fixture()
        let result = try fixture.personalize(try fixture.register("tpm@example.org"))
        #expect(result.entity.keyKind == .tpm)
        #expect(try fixture.activations().first?["keyKind"] as? String == "tpm", "the manager stores the key kind")
        #expect(try login(try fixture.sdk(), result.idmIdentifier).subject == "tpm@example.org")
        #expect(
            try FileManager.default.attributesOfItem(atPath: keyFile(fixture, result))[.posixPermissions] as? Int
                == 0o600)
    }

    @Test func theSameKeySignsAfterARestart() throws {
        let (fixture, tpm) = try fixture()
        let result = try fixture.personalize(try fixture.register("reboot@example.org"))
        tpm.stop()
        try tpm.start()
        #expect(try login(try fixture.sdk(), result.idmIdentifier).subject == "reboot@example.org")
    }

    @Test func afterAClearTheUserIsToldToEnrollAgainAndNothingChanges() throws {
        let (fixture, tpm) = try fixture()
        let result = try fixture.personalize(try fixture.register("cleared@example.org"))
        try tpm.clear()
        let before = fixture.snapshot()
        do {
            _ = try login(try fixture.sdk(), result.idmIdentifier)
            Issue.record("a cleared TPM still signed")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .deviceKeyFailure)
            #expect(
                error.message.contains("the TPM was cleared") && error.message.contains("xign-setup personalize"),
                "\(error.message)")
        }
        #expect(fixture.snapshot() == before, "the state is untouched")
        #expect(try fixture.activations().first?["failedAttempts"] as? Int == 0, "no PIN was sent")
    }

    @Test func aBlobCopiedToAnotherTPMDoesNotLoad() throws {
        let (fixture, _) = try fixture()
        let result = try fixture.personalize(try fixture.register("copied@example.org"))
        let other = try SoftwareTPM()
        fixture.tpm = other
        do {
            _ = try login(try fixture.sdk(), result.idmIdentifier)
            Issue.record("the key loaded into another TPM")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .deviceKeyFailure, "\(error.message)")
        }
    }

    @Test func thePrivateKeyIsStoredOnlyWrappedByTheTPM() throws {
        let (fixture, _) = try fixture()
        let result = try fixture.personalize(try fixture.register("wrapped@example.org"))
        let stored = try Data(contentsOf: URL(fileURLWithPath: keyFile(fixture, result)))
        #expect(stored.starts(with: Array("XIGNTPM1".utf8)))
        // Nothing in the state is a private key in the clear.
        for (name, data) in fixture.snapshot() {
            #expect(!String(decoding: data, as: UTF8.self).contains("PRIVATE KEY"), "\(name)")
        }
        // The file: magic, then SRK name, TPM2B_PUBLIC and TPM2B_PRIVATE, each with a 16-bit length.
        var fields: [Data] = []
        var offset = 8
        while offset + 2 <= stored.count {
            let length = Int(stored[offset]) << 8 | Int(stored[offset + 1])
            fields.append(stored.subdata(in: (offset + 2)..<min(stored.count, offset + 2 + length)))
            offset += 2 + length
        }
        #expect(fields.count == 3 && offset == stored.count)
        // TPM2B_PRIVATE is the sensitive area encrypted and integrity-protected under the SRK (an HMAC, an IV, ciphertext),
        // well beyond a bare 32-byte scalar.
        #expect(fields[2].count > 32 + 16 + 32)
        // One changed byte of it is caught by the TPM, and nothing signs.
        var tampered = stored
        tampered[tampered.count - 1] ^= 0x01
        try writeTestFile(keyFile(fixture, result), tampered)
        do {
            _ = try login(try fixture.sdk(), result.idmIdentifier)
            Issue.record("a tampered blob signed")
        } catch let error as XignSdkError {
            #expect(error.errorCode == .deviceKeyFailure, "\(error.message)")
        }
    }

    @Test func aHardwareKeyPassesWhereTheManagerRequiresOne() throws {
        let (fixture, _) = try fixture(
            managerConfig: ManagerProcess.testConfig + "\n[policy]\nrequire_hardware_key = true\n")
        let result = try fixture.personalize(try fixture.register("hardware@example.org"))
        #expect(try login(try fixture.sdk(), result.idmIdentifier).subject == "hardware@example.org")
    }

    @Test func autoMakesTheKeyInTheTPMWhereOneWorks() throws {
        let (fixture, _) = try fixture()
        fixture.adjust = { $0.deviceKey = .auto }
        let choice = try fixture.sdk().newKeyKind()
        #expect(choice.kind == .tpm && choice.warning == nil)
        let result = try fixture.personalize(try fixture.register("auto-tpm@example.org"))
        #expect(try fixture.sdk().entity(result.idmIdentifier).keyKind == .tpm)
    }

    @Test func autoFallsBackToASoftwareKeyAndSaysSo() throws {
        let fixture = try Fixture()
        let missing = "swtpm:path=\(fixture.directory.file("no-tpm-here"))"
        fixture.adjust = {
            $0.deviceKey = .auto
            $0.tcti = missing
        }
        let choice = try fixture.sdk().newKeyKind()
        #expect(choice.kind == .software)
        #expect(
            choice.warning?.contains("this key is a software key, which a copy of the disk can use") == true,
            "\(String(describing: choice.warning))")
        let result = try fixture.personalize(try fixture.register("auto@example.org"))
        #expect(try fixture.sdk().entity(result.idmIdentifier).keyKind == .software)
    }

    @Test func autoIsTheDefault() {
        #expect(ClientConfiguration().deviceKey == .auto)
    }

    @Test func doctorReportsEachItemWithTheTPMPresentAndAbsent() throws {
        let (fixture, tpm) = try fixture()
        let result = try fixture.personalize(try fixture.register("doctor@example.org"))
        let pam = fixture.directory.file("pam.d")
        try FileManager.default.createDirectory(atPath: pam, withIntermediateDirectories: true)
        _ = try fixture.directory.write("pam.d/sudo", "auth required pam_xign.so\n")
        let healthy = try fixture.sdk().diagnose(pamDirectory: pam)
        #expect(healthy.status == .ok, "\(healthy.items.map { "\($0.name): \($0.detail)" })")
        #expect(
            healthy.items.map(\.name) == [
                "tcti", "tpm", "srk", "tpm lockout", "ek certificate", "device_key",
                "key \(result.idmIdentifier.prefix(8)) (alice, tpm)",
                "offline \(result.idmIdentifier.prefix(8)) (alice)", "manager \(fixture.manager.url)", "pam",
            ])
        #expect(
            healthy.items.first { $0.name.hasPrefix("offline") }?.detail.hasPrefix("offline login possible until")
                == true)
        #expect(healthy.items.first { $0.name == "device_key" }?.detail == "tpm: new keys are tpm keys")
        tpm.stop()
        fixture.manager.stop()
        let sick = try fixture.sdk().diagnose(pamDirectory: fixture.directory.file("empty"))
        let status = Dictionary(uniqueKeysWithValues: sick.items.map { ($0.name, $0.status) })
        #expect(status["tpm"] == .failure)
        #expect(status["key \(result.idmIdentifier.prefix(8)) (alice, tpm)"] == .failure)
        #expect(status["manager \(fixture.manager.url)"] == .failure)
        #expect(status["pam"] == .warning)
        #expect(sick.items.allSatisfy { $0.status == .ok || $0.hint != nil }, "every problem comes with a hint")
    }

    @Test func doctorWarnsOfASoftwareKeyOnAMachineWithATPM() throws {
        let (fixture, tpm) = try fixture()
        fixture.adjust = { $0.deviceKey = .software }
        let result = try fixture.personalize(try fixture.register("soft@example.org"))
        fixture.adjust = {
            $0.deviceKey = .auto
            $0.tcti = tpm.tcti
        }
        let items = try fixture.sdk().diagnose(pamDirectory: fixture.directory.path).items
        let key = try #require(items.first { $0.name == "key \(result.idmIdentifier.prefix(8)) (alice, software)" })
        #expect(
            key.status == .warning && key.hint?.contains("personalize again to make the key in the TPM") == true,
            "\(key)")
        #expect(items.first { $0.name == "device_key" }?.detail == "auto: new keys are tpm keys")
    }
}
