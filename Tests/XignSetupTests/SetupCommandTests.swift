import ArgumentParser
import Foundation
import Testing
import XignCore
import XignProtocol
import XignTestSupport

@testable import xign_setup

extension ChildProcess.Result {
    /// The status as xign-setup names it (ExitCode+Xign.swift).
    var exitCode: ExitCode { ExitCode(status) }
}

/// xign-setup as a user or a script runs it: the real binary against the real manager.
final class Setup: @unchecked Sendable {
    let manager: ManagerProcess
    let directory = TemporaryDirectory()
    var state: String { directory.file("state") }

    /// `servingBrowsers`: the manager's public URL is http://localhost:PORT, so a browser can make passkeys for it.
    init(managerConfig: String = ManagerProcess.testConfig, servingBrowsers: Bool = false) throws {
        manager =
            servingBrowsers ? try .servingBrowsers(config: managerConfig) : try ManagerProcess(config: managerConfig)
    }

    func run(
        _ arguments: [String], stdin: String? = nil, asUser: String? = nil, environment: [String: String]? = nil,
        extraFileDescriptor: (fd: Int32, contents: String)? = nil
    ) throws -> ChildProcess.Result {
        var executable = try Products.path("xign-setup")
        var arguments = arguments
        if let asUser {
            // A copy the other user can surely execute, wherever the build tree lives.
            let copy = directory.file("xign-setup")
            if !FileManager.default.fileExists(atPath: copy) {
                try writeTestFile(copy, try Data(contentsOf: URL(fileURLWithPath: executable)), mode: 0o755)
            }
            arguments = ["--reuid=\(asUser)", "--regid=\(asUser)", "--clear-groups", "--", copy] + arguments
            executable = "/usr/bin/setpriv"
        }
        return try ChildProcess(
            executable, arguments, stdin: stdin, environment: environment, extraFileDescriptor: extraFileDescriptor,
            in: directory
        ).wait()
    }

    func register(_ email: String, pin: String = "24680") throws {
        let result = try run(
            ["register", "--manager", manager.url.description, "--email", email, "--pin-stdin", "--state-dir", state],
            stdin: pin + "\n")
        guard result.exitCode == .success else {
            throw TestFailure("register failed (\(result.status)): \(result.stderr)")
        }
    }

    func personalize(
        _ email: String, pin: String = "24680", extra: [String] = [], state: String? = nil
    ) throws -> ChildProcess.Result {
        try run(
            [
                "personalize", "--mail", try manager.mailPath(for: email), "--pin-stdin", "--no-qr", "--user", "alice",
                "--state-dir", state ?? self.state, "--json",
            ] + extra, stdin: pin + "\n")
    }

    func json(_ text: String) throws -> [String: Any] {
        guard let object = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw TestFailure("not a JSON object: \(text)")
        }
        return object
    }

    func snapshot() -> [String: Data] {
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: state)
        while let relative = enumerator?.nextObject() as? String {
            if relative != ".lock", let data = FileManager.default.contents(atPath: state + "/" + relative) {
                files[relative] = data
            }
        }
        return files
    }
}

@Suite struct SetupCommandTests {
    @Test func registerPersonalizeAndListEndToEnd() throws {
        let setup = try Setup()
        try setup.register("cli@example.org")
        let mail = try String(contentsOfFile: setup.manager.mailPath(for: "cli@example.org"), encoding: .utf8)
        #expect(mail.contains(PersonalizationPayload.compactPrefix))
        let result = try setup.personalize("cli@example.org")
        #expect(result.exitCode == .success, "\(result.stderr)")
        let personalized = try setup.json(result.stdout)
        #expect(personalized["outcome"] as? String == "newPersonalization")
        let id = try #require(personalized["idmIdentifier"] as? String)
        let list = try setup.json(try setup.run(["list", "--json", "--state-dir", setup.state]).stdout)
        let entries = try #require(list["identityManagers"] as? [[String: Any]])
        #expect(entries.map { $0["idmIdentifier"] as? String } == [id])
        #expect(entries.first?["email"] as? String == "cli@example.org")
        #expect(entries.first?["localUser"] as? String == "alice")
    }

    @Test(arguments: ["utf8", "utf8-inverted", "ansi"])
    func qrDrawsADecodableCodeInEachStyle(style: String) throws {
        let setup = try Setup()
        let payload = PersonalizationPayload(
            managerURL: setup.manager.url, activationId: "0123456789abcdef0123456789abcdef",
            activationSecret: String(repeating: "s", count: 43),
            managerKeyFingerprint: String(repeating: "k", count: 43)
        ).deepLink
        let result = try setup.run(["qr", payload, "--style", style, "--columns", "80"])
        #expect(result.exitCode == .success, "\(result.stderr)")
        let bitmap = try QRReader.bitmap(fromTerminalText: result.stdout, inverted: style == "utf8-inverted")
        #expect(try QRReader.decode(bitmap: bitmap, in: setup.directory) == payload)
    }

    @Test func qrRefusesWhatDoesNotFitAndExportsPNG() throws {
        let setup = try Setup()
        let long = String(repeating: "w", count: 500)
        let narrow = try setup.run(["qr", long, "--columns", "60"])
        #expect(narrow.exitCode == .failure)
        #expect(narrow.stderr.contains("--png"))
        let png = setup.directory.file("code.png")
        #expect(try setup.run(["qr", long, "--png", png]).exitCode == .success)
        #expect(try QRReader.zbarimg(png, in: setup.directory) == long)
    }

    @Test func badInputGivesAClearErrorAndChangesNothing() throws {
        let setup = try Setup()
        try setup.register("bad@example.org")
        #expect(try setup.personalize("bad@example.org").exitCode == .success)
        // The first personalization used the data; the administrator's new data leads to the activation again.
        _ = try setup.manager.reissue("bad@example.org")
        let before = setup.snapshot()
        let mailPath = try setup.manager.mailPath(for: "bad@example.org")

        let malformed = try setup.run(
            ["personalize", "xign://personalize?v=1&m=x", "--pin-stdin", "--state-dir", setup.state], stdin: "24680\n")
        #expect(malformed.exitCode == .failure)
        #expect(malformed.stderr.contains("activation data is not valid"))

        let garbageMail = try setup.directory.write("garbage.eml", "Subject: hi\r\n\r\nno link\r\n")
        let noLink = try setup.run(
            ["personalize", "--mail", garbageMail, "--pin-stdin", "--state-dir", setup.state], stdin: "24680\n")
        #expect(noLink.exitCode == .failure)
        #expect(noLink.stderr.contains("contains no activation data"))

        let plain = try setup.run(
            [
                "register", "--manager", "http://192.0.2.10:8440", "--email", "x@example.org", "--pin-stdin",
                "--state-dir", setup.state,
            ],
            stdin: "24680\n")
        #expect(plain.exitCode == .failure)
        #expect(plain.stderr.contains("plain http to a host that is not loopback"))

        let undecided = try setup.run(
            [
                "personalize", "--mail", mailPath, "--pin-stdin", "--no-qr", "--user", "alice", "--state-dir",
                setup.state,
            ], stdin: "24680\n")
        #expect(undecided.exitCode == .validationFailure)
        #expect(undecided.stderr.contains("--on-existing"))

        let pinInArgv = try setup.run(["personalize", "--mail", mailPath, "--pin", "24680", "--state-dir", setup.state])
        #expect(pinInArgv.exitCode == .validationFailure, "there is no way to pass a PIN in argv")

        let wrong = try setup.personalize("bad@example.org", pin: "13570")
        #expect(wrong.exitCode == .lockedOut)
        #expect(try setup.json(wrong.stdout)["status"] as? String == "lockout")
        #expect(wrong.stderr.contains("Run the same command again after that time"))

        setup.manager.stop()
        let down = try setup.run(
            [
                "register", "--manager", setup.manager.url.description, "--email", "y@example.org", "--pin-stdin",
                "--state-dir", setup.state,
            ],
            stdin: "24680\n")
        #expect(down.exitCode == .managerUnreachable)
        #expect(down.stderr.contains("cannot reach the manager"))

        #expect(
            setup.snapshot().filter { $0.key != "identity-managers.json" }
                == before.filter { $0.key != "identity-managers.json" })
        // The only change in the state file is the remembered lockout of the wrong PIN.
        let stored =
            try JSONSerialization.jsonObject(with: try #require(setup.snapshot()["identity-managers.json"]))
            as? [String: Any]
        let original =
            try JSONSerialization.jsonObject(with: try #require(before["identity-managers.json"])) as? [String: Any]
        #expect((stored?["entries"] as? [[String: Any]])?.count == (original?["entries"] as? [[String: Any]])?.count)
    }

    @Test func aStateDirectoryThatCannotBeWrittenIsReportedAndLeftAlone() throws {
        let setup = try Setup()
        try setup.register("ro@example.org")
        #expect(try setup.personalize("ro@example.org").exitCode == .success)
        try setup.register("ro2@example.org")
        let before = setup.snapshot()
        let result: ChildProcess.Result
        if getuid() == 0 {
            // Root writes anywhere; an ordinary user cannot write root's 0700 state directory.
            // The user saved the activation mail where they can read it.
            chmod(setup.directory.path, 0o755)
            let mail = try setup.directory.write(
                "activation.eml",
                String(contentsOfFile: setup.manager.mailPath(for: "ro2@example.org"), encoding: .utf8), mode: 0o644)
            result = try setup.run(
                ["personalize", "--mail", mail, "--pin-stdin", "--no-qr", "--state-dir", setup.state], stdin: "24680\n",
                asUser: "65534")
        } else {
            chmod(setup.state, 0o500)
            defer { chmod(setup.state, 0o700) }
            result = try setup.personalize("ro2@example.org")
        }
        #expect(result.exitCode == .failure, "\(result.stderr)")
        #expect(
            result.stderr.contains("cannot be written") || result.stderr.contains("cannot read the xign state"),
            "\(result.stderr)")
        #expect(setup.snapshot() == before)
        #expect(try setup.manager.admin(["activations", "--json"]).stdout.contains("\"failedAttempts\" : 0"))
    }

    @Test func rePersonalizationWithANewActivationFromAScript() throws {
        let setup = try Setup()
        try setup.register("re@example.org")
        #expect(try setup.personalize("re@example.org").exitCode == .success)
        _ = try setup.manager.reissue("re@example.org")
        let fresh = setup.directory.file("fresh")
        let result = try setup.run(
            [
                "personalize", "--mail", try setup.manager.mailPath(for: "re@example.org"), "--pin-stdin", "--no-qr",
                "--user", "alice",
                "--state-dir", fresh, "--json", "--on-existing", "new-activation", "--alias", "Second",
            ], stdin: "24680\n97531\n")
        #expect(result.exitCode == .success, "\(result.stderr)")
        let json = try setup.json(result.stdout)
        #expect(json["outcome"] as? String == "rePersonalization")
        #expect(json["alias"] as? String == "Second")
    }

    @Test func aRejectedRegistrationListsTheReasons() throws {
        let setup = try Setup()
        try setup.register("dup@example.org")
        let again = try setup.run(
            [
                "register", "--manager", setup.manager.url.description, "--email", "dup@example.org", "--pin-stdin",
                "--json",
                "--state-dir", setup.state,
            ], stdin: "24680\n")
        #expect(again.exitCode == .registrationRejected)
        #expect(again.stderr.contains("email: already in use or blocked"))
        #expect((try setup.json(again.stdout)["errors"] as? [String: String]) == ["email": "notAvailable"])
        let weak = try setup.run(
            [
                "register", "--manager", setup.manager.url.description, "--email", "w@example.org", "--pin-stdin",
                "--state-dir", setup.state,
            ],
            stdin: "12345\n")
        #expect(weak.exitCode == .failure)
        #expect(weak.stderr.contains("too common"))
    }

    @Test func thePINCanComeFromAFileDescriptor() throws {
        let setup = try Setup()
        try setup.register("fd@example.org")
        let result = try setup.run(
            [
                "personalize", "--mail", try setup.manager.mailPath(for: "fd@example.org"), "--pin-fd", "5", "--no-qr",
                "--state-dir", setup.state, "--json",
            ], extraFileDescriptor: (5, "24680\n"))
        #expect(result.exitCode == .success, "\(result.stderr)")
        #expect(try setup.json(result.stdout)["status"] as? String == "personalized")
    }

    @Test func proxyVariablesInTheEnvironmentAreIgnoredAndTheConfiguredProxyIsUsed() throws {
        let setup = try Setup()
        let trap = try FaultyServer { _ in
            FaultyServer.http(status: 502, contentType: "text/plain", body: Array("proxy".utf8))
        }
        var environment = ProcessInfo.processInfo.environment
        for name in ["http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"] {
            environment[name] = trap.url
        }
        environment["no_proxy"] = nil
        environment["NO_PROXY"] = nil
        let direct = try setup.run(
            [
                "register", "--manager", setup.manager.url.description, "--email", "proxy@example.org", "--pin-stdin",
                "--state-dir", setup.state,
            ], stdin: "24680\n", environment: environment)
        #expect(direct.exitCode == .success, "\(direct.stderr)")
        #expect(trap.requests.isEmpty, "a proxy from the environment was used")
        // The proxy named in the config file is used.
        let config = try setup.directory.write("xign.conf", "proxy = \(trap.url)\n")
        let proxied = try setup.run(
            [
                "register", "--config", config, "--manager", setup.manager.url.description, "--email",
                "proxy2@example.org",
                "--pin-stdin", "--state-dir", setup.state,
            ], stdin: "24680\n")
        #expect(proxied.exitCode == .failure)
        #expect(
            trap.requests.first?.hasPrefix("GET http://127.0.0.1:\(setup.manager.port)/v1/registration/parameters")
                == true)
    }

    @Test func anInviteMergesFromAScript() throws {
        let setup = try Setup()
        try setup.register("erin@example.org")
        #expect(try setup.personalize("erin@example.org").exitCode == .success)
        let invite = try setup.manager.admin(["invite", "--email", "erin@acme.example", "--organization", "Acme"])
        let invitePIN = try #require(
            invite.stdout.split(separator: "\n").last?.split(separator: " ").last.map(String.init))
        let result = try setup.personalize(
            "erin@acme.example", pin: invitePIN + "\n24680", extra: ["--on-merge", "merge"])
        #expect(result.exitCode == .success, "\(result.stderr)")
        let json = try setup.json(result.stdout)
        #expect(json["status"] as? String == "merged")
        #expect(json["mergedEmail"] as? String == "erin@acme.example")
    }

    /// xign-setup is not setuid: whoever runs it chose its environment, so the libraries' debugging variables work
    /// there (docs/security.md), unlike inside pam_xign.so in su or sudo.
    @Test func aToolThatIsNotSetuidKeepsTheLibrariesDebuggingVariables() throws {
        let setup = try Setup()
        let tpm = try SoftwareTPM()
        let config = try setup.directory.write("xign.conf", "device_key = tpm\ntcti = \(tpm.tcti)\n")
        let trace = setup.directory.file("tss2.log")
        let result = try setup.run(
            ["doctor", "--config", config, "--state-dir", setup.state, "--pam-dir", setup.directory.path],
            environment: ["PATH": "/usr/bin:/bin", "TSS2_LOG": "all+trace", "TSS2_LOGFILE": trace])
        #expect(result.stdout.contains("TPM"), "\(result.stdout)\(result.stderr)")
        #expect(FileManager.default.fileExists(atPath: trace), "libtss2 honours TSS2_LOGFILE for the tool's own runs")
    }
}
