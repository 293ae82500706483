import Foundation
import XignCore
import XignHarness
import XignProtocol

/// The approval page as a phone opens it from the QR code: Chromium with a passkey made on the activation page, under
/// a slow mobile network (Lighthouse's profile), with an empty cache and then a warm one; the bytes it fetched and
/// when its form could be used, beside one small answer from the same server as the floor.
extension Bench {
    static func phonePageFigures() throws {
        let repository = FileManager.default.currentDirectoryPath
        let python = repository + "/.build-browser/venv/bin/python"
        let script = repository + "/Tests/XignTestSupport/Browser/browser.py"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            return print(
                "\n(the phone page needs selenium: bash Tests/XignTestSupport/Browser/setup.sh; make bench runs it)")
        }
        let manager = try ManagerProcess.servingBrowsers(config: ManagerBench.config)
        defer { manager.stop() }
        let email = "phone@example.org"
        let added = try manager.admin(["accounts", "add", email, "--login-name", "bench"])
        guard added.status == 0, let pin = added.stdout.split(separator: " ").last else {
            throw XignSdkError(.invalidInput, "admin accounts add: \(added.stderr)")
        }
        // The bench's host names no local user: the account may be the hosts' own.
        guard try manager.admin(["accounts", "set-host-groups", email, "--all"]).status == 0,
            try manager.admin(["accounts", "set-local-user", email, "yes"]).status == 0
        else {
            throw XignSdkError(.invalidInput, "admin accounts set-host-groups failed")
        }
        let directory = TemporaryDirectory()
        func browser(_ command: String, _ url: String, stdin: String) throws -> [String: Any] {
            let result = try ChildProcess(
                python, [script, "--profile", directory.file("phone"), command, url], stdin: stdin, in: directory
            ).wait(timeout: 180)
            guard result.status == 0,
                let answer = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any],
                (answer["error"] as? String ?? "").isEmpty
            else {
                throw XignSdkError(
                    .invalidInput, "browser \(command): \(result.stdout.prefix(600)) \(result.stderr.suffix(300))")
            }
            return answer
        }
        _ = try browser(
            "personalize", try manager.activationAppLink(for: email),
            stdin: pin.trimmingCharacters(in: .whitespacesAndNewlines) + "\n")
        let host = try ManagerBench.joinedHost(
            "bench-host", at: manager, state: directory.file("host"), url: try ManagerURL(manager.browserURL))
        let pending = try (0..<2).map { index in
            try host.startLoginConfirmation(
                loginName: "bench", service: "sshd", remoteHost: "198.51.100.\(index + 1)", tty: nil, command: nil)
        }
        let answer = try browser("page-cost", pending[0].payload, stdin: pending[1].payload + "\n")
        guard let cold = answer["cold"] as? [String: Any], let warm = answer["warm"] as? [String: Any],
            let floor = answer["floorMs"] as? Double
        else { throw XignSdkError(.invalidInput, "the phone page: \(answer)") }
        print(
            "\nThe approval page on a phone (Chromium, 150 ms round trip, 1.6 Mbit/s down, 750 kbit/s up), opened from the QR code"
        )
        for (name, figures) in [("empty cache", cold), ("warm cache", warm)] {
            let usable = figures["usableMs"] as? Double ?? .nan
            print(
                String(
                    format: "%@: usable after %.0f ms (%.1f× the floor), %@ bytes over the network, %@ of %@ requests",
                    name, usable, usable / floor, "\(figures["bytes"] ?? "?")", "\(figures["fromNetwork"] ?? "?")",
                    "\(figures["requests"] ?? "?")"))
        }
        print(
            String(
                format: "floor, same run and network: one small answer from the manager on a new connection, %.0f ms",
                floor))
    }
}
