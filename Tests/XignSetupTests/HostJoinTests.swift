import ArgumentParser
import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import xign_setup

/// `xign-manager admin hosts` and `xign-setup host join`, with the real manager and the real binaries.
@Suite struct HostJoinTests {
    /// `admin hosts add NAME`: the token from its last line.
    func addHost(_ setup: Setup, _ name: String, extra: [String] = []) throws -> String {
        let result = try setup.manager.admin(["hosts", "add", name] + extra)
        guard result.status == 0,
            let token = result.stdout.split(separator: " ").last.map({
                String($0).trimmingCharacters(in: .whitespacesAndNewlines)
            })
        else {
            throw TestFailure("hosts add failed: \(result.stderr)")
        }
        return token
    }

    func join(_ setup: Setup, token: String, config: [String] = []) throws -> ChildProcess.Result {
        try setup.run(
            ["host", "join", "--manager", setup.manager.url.description, "--state-dir", setup.state, "--json"] + config,
            stdin: token + "\n")
    }

    func hostsAtManager(_ setup: Setup) throws -> [[String: Any]] {
        let result = try setup.manager.admin(["hosts", "list", "--json"])
        return try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]] ?? []
    }

    func keyFiles(_ setup: Setup) -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: setup.state + "/keys")) ?? []).sorted()
    }

    @Test func aHostJoinsOnceWithItsTokenAndPinsTheManagerKey() throws {
        let setup = try Setup()
        let token = try addHost(setup, "web1.example.org")
        #expect(token.hasPrefix("xhj1."))
        let joined = try join(setup, token: token)
        #expect(joined.exitCode == .success, "\(joined.stderr)")
        let answer = try setup.json(joined.stdout)
        #expect(answer["name"] as? String == "web1.example.org")
        let hosts = try hostsAtManager(setup)
        #expect(
            hosts.count == 1 && hosts[0]["name"] as? String == "web1.example.org"
                && hosts[0]["id"] as? String == answer["hostId"] as? String)
        let files = keyFiles(setup)
        #expect(
            files.count == 1 && files[0].hasPrefix("key-") && files[0].hasSuffix(".pem"),
            "the host key, under a name chosen here: \(files)")
        #expect(!files[0].contains(answer["hostId"] as? String ?? "?"), "not under the manager's id")
        let listed = try setup.run(["host", "list", "--state-dir", setup.state])
        #expect(listed.stdout.contains("web1.example.org"))

        // The token works once; a second join changes nothing here and leaves no key behind.
        let before = setup.snapshot()
        let again = try join(setup, token: token)
        #expect(again.exitCode == .failure)
        #expect(again.stderr.contains("unknown, used or expired"), "\(again.stderr)")
        #expect(setup.snapshot() == before)
        #expect(try hostsAtManager(setup).count == 1)
    }

    @Test func theTokenNeverComesFromTheCommandLineAndBadTokensSayWhatTheyShouldLookLike() throws {
        let setup = try Setup()
        let token = try addHost(setup, "web2")
        let inArgv = try setup.run([
            "host", "join", "--manager", setup.manager.url.description, "--state-dir", setup.state, token,
        ])
        #expect(inArgv.exitCode == .validationFailure)
        let garbled = try join(setup, token: "xhj1.not-a-token")
        #expect(garbled.exitCode == .failure)
        #expect(garbled.stderr.contains("xhj1.<secret>.<fingerprint>"), "\(garbled.stderr)")
        // A token whose fingerprint names another key: the manager's answer is not believed, nothing is stored.
        let forged = String(token.dropLast(43)) + String(repeating: "A", count: 43)
        let refused = try join(setup, token: forged)
        #expect(refused.exitCode == .failure)
        #expect(refused.stderr.contains("does not match the fingerprint"), "\(refused.stderr)")
        #expect(keyFiles(setup).isEmpty)
        #expect(try setup.run(["host", "list", "--state-dir", setup.state]).stdout.contains("has joined no manager"))
    }

    @Test func anExpiredTokenIsRefusedAndANameIsIssuedAgainOnlyAfterRemoval() throws {
        let setup = try Setup()
        let token = try addHost(setup, "db1")
        let expire = try ChildProcess(
            "/usr/bin/sqlite3",
            [
                "-cmd", ".timeout 5000", setup.manager.dataDirectory + "/manager.sqlite",
                "UPDATE host_join_tokens SET expires_at = 1;",
            ], in: setup.directory
        ).wait()
        #expect(expire.status == 0)
        #expect(try join(setup, token: token).stderr.contains("unknown, used or expired"))
        #expect(
            try join(setup, token: try addHost(setup, "db1")).exitCode == .success,
            "a new token for the same name replaces the expired one")
        let taken = try setup.manager.admin(["hosts", "add", "db1"])
        #expect(taken.status != 0 && taken.stderr.contains("hosts remove db1"), "\(taken.stderr)")
        #expect(try setup.manager.admin(["hosts", "remove", "db1"]).status == 0)
        #expect(try hostsAtManager(setup).isEmpty)
        #expect(try setup.manager.admin(["hosts", "add", "db1"]).status == 0)
        let badName = try setup.manager.admin(["hosts", "add", "db 1; rm"])
        #expect(badName.status != 0 && badName.stderr.contains("not a host name"))
    }

    @Test func aManagerThatRequiresHardwareKeysRefusesASoftwareHostKeyAndTakesATPMOne() throws {
        let setup = try Setup(managerConfig: ManagerProcess.testConfig + "\n[policy]\nrequire_hardware_key = true\n")
        let software = try join(setup, token: try addHost(setup, "soft"))
        #expect(software.exitCode == .securityInsufficient, "\(software.stderr)")
        let tpm = try SoftwareTPM()
        let config = try setup.directory.write("xign.conf", "device_key = tpm\ntcti = \(tpm.tcti)\n")
        let hardware = try join(setup, token: try addHost(setup, "hard"), config: ["--config", config])
        #expect(hardware.exitCode == .success, "\(hardware.stderr)")
        #expect(try setup.json(hardware.stdout)["keyKind"] as? String == "tpm")
    }
}
