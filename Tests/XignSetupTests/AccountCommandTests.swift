import ArgumentParser
import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import xign_setup

/// change-pin, new-activation, list --devices and delete as a script runs them, against the real manager.
@Suite struct AccountCommandTests {
    func enrolled(_ setup: Setup, _ email: String) throws -> String {
        try setup.register(email)
        let result = try setup.personalize(email)
        guard result.exitCode == .success, let id = try setup.json(result.stdout)["idmIdentifier"] as? String else {
            throw TestFailure("personalize failed: \(result.stderr)")
        }
        return id
    }

    func devices(_ setup: Setup, state: String) throws -> [[String: Any]] {
        let list = try setup.run(["list", "--devices", "--json", "--state-dir", state])
        guard list.exitCode == .success else { throw TestFailure("list --devices failed: \(list.stderr)") }
        let entries = try setup.json(list.stdout)["identityManagers"] as? [[String: Any]]
        return entries?.first?["devices"] as? [[String: Any]] ?? []
    }

    @Test func changePinNewActivationDeviceListAndDeleteFromAScript() throws {
        let setup = try Setup()
        let id = try enrolled(setup, "script@example.org")
        let state = ["--state-dir", setup.state, "--pin-stdin", "--json"]

        let change = try setup.run(["change-pin"] + state, stdin: "24680\n97531\n")
        #expect(change.exitCode == .success, "\(change.stderr)")
        #expect(try setup.json(change.stdout)["status"] as? String == "changed")
        let old = try setup.run(["change-pin"] + state, stdin: "24680\n86420\n")
        #expect(old.exitCode == .lockedOut, "the old PIN is a wrong PIN: \(old.stderr)")
        #expect(old.stderr.contains("Wrong PIN"))
        Thread.sleep(forTimeInterval: 0.4)

        let request = try setup.run(
            ["new-activation", "--alias", "Laptop 2", "--send-email"] + state, stdin: "97531\n25814\n")
        #expect(request.exitCode == .success, "\(request.stderr)")
        let made = try setup.json(request.stdout)
        #expect(made["alias"] as? String == "Laptop 2" && made["mailQueued"] as? Bool == true)
        let link = try #require(made["activationData"] as? String)
        #expect(try PersonalizationPayload(parsing: link).activationId == made["activationId"] as? String)
        let second = setup.directory.file("second")
        let personalized = try setup.run(
            ["personalize", link, "--pin-stdin", "--no-qr", "--user", "alice", "--state-dir", second, "--json"],
            stdin: "25814\n")
        #expect(personalized.exitCode == .success, "\(personalized.stderr)")

        let listed = try devices(setup, state: setup.state)
        #expect(listed.count == 2)
        for device in listed {
            #expect(
                (device["name"] as? String)?.isEmpty == false
                    && (device["platform"] as? String)?.hasPrefix("Linux") == true)
            #expect(device["keyKind"] as? String == "software" && device["enrolledAt"] is String)
        }
        #expect(
            listed.first { $0["deviceId"] as? String == id }?["lastUsedAt"] is String, "the PIN change used this device"
        )

        let script = try setup.run(["delete"] + state, stdin: "97531\n")
        #expect(
            script.exitCode.rawValue == 64 && script.stderr.contains("--yes"),
            "no terminal, no --yes: nothing is asked or deleted")
        let deletion = try setup.run(["delete", "--yes"] + state, stdin: "97531\n")
        #expect(deletion.exitCode == .success, "\(deletion.stderr)")
        #expect(try setup.json(deletion.stdout)["revokedDevices"] as? Int == 2)
        let empty = try setup.json(try setup.run(["list", "--json", "--state-dir", setup.state]).stdout)
        #expect((empty["identityManagers"] as? [Any])?.isEmpty == true)
        let orphan = try setup.run(["list", "--devices", "--json", "--state-dir", second])
        #expect(orphan.exitCode == .failure && orphan.stderr.contains("not enrolled"), "\(orphan.stderr)")
    }

    @Test func aNewPINAgainstThePolicyIsRefusedAndTheOldOneStays() throws {
        let setup = try Setup()
        _ = try enrolled(setup, "policy@example.org")
        let state = ["--state-dir", setup.state, "--pin-stdin", "--json"]
        let refused = try setup.run(["change-pin"] + state, stdin: "24680\n56789\n")
        #expect(refused.exitCode == .failure)
        #expect(refused.stderr.contains("consecutive"), "\(refused.stderr)")
        let change = try setup.run(["change-pin"] + state, stdin: "24680\n97531\n")
        #expect(change.exitCode == .success, "the old PIN still holds: \(change.stderr)")
    }

    @Test func addFactorChecksTheFingerOnFprintdsReader() throws {
        let reader = try FingerprintDaemon()
        let setup = try Setup()
        _ = try enrolled(setup, "finger@example.org")
        let config = try setup.directory.write(
            "xign.conf", "state_dir = \(setup.state)\nfprintd_bus = \(reader.busAddress)\nfingerprint_timeout = 5s\n")
        let command = ["add-factor", "biometric", "--config", config, "--pin-stdin", "--json"]
        let otp = try setup.run(["add-factor", "otp", "--config", config, "--pin-stdin"], stdin: "24680\n")
        #expect(otp.exitCode.rawValue == 64 && otp.stderr.contains("only biometric"))
        let noFinger = try setup.run(command, stdin: "24680\n")
        #expect(noFinger.exitCode == .failure && noFinger.stderr.contains("fprintd-enroll alice"), "\(noFinger.stderr)")
        try reader.enrol(user: "alice", finger: "alice-right")
        reader.scanLater("alice-right")
        let added = try setup.run(command, stdin: "24680\n")
        #expect(added.exitCode == .success, "\(added.stderr)")
        #expect(try setup.json(added.stdout)["factors"] as? [String] == ["device", "pin", "biometric"])
        #expect(added.stderr.contains("Touch the fingerprint reader."))
        #expect(
            try devices(setup, state: setup.state).first?["factors"] as? [String] == ["device", "pin", "biometric"])
        let doctor = try setup.json(
            try setup.run(["doctor", "--config", config, "--json", "--pam-dir", setup.directory.path]).stdout)
        let fingerprint = (doctor["items"] as? [[String: Any]])?.first {
            ($0["name"] as? String)?.hasPrefix("fingerprint") == true
        }
        #expect(
            fingerprint?["status"] as? String == "ok"
                && (fingerprint?["detail"] as? String)?.contains("right-index-finger") == true)
    }
}
