import Foundation
import Testing
import XignTestSupport

/// The real sudo, run by an ordinary user in a pseudo-terminal, with a PAM service of its own (sudoers'
/// pam_service) that asks for a confirmation: sudo shows the text and waits by itself for the approval.
@Suite struct SudoConfirmationTests {
    @Test func sudoWaitsForTheApprovalAndRunsTheCommand() throws {
        let user = try SSHServer.user.get()
        let fixture = try ConfirmationFixture()
        try fixture.laptop.manager.giveLogin("alice@example.org", user)
        let service = "xign-test-sudo-\(getpid())"
        let pamFile = "/etc/pam.d/\(service)", sudoersFile = "/etc/sudoers.d/xign-test-\(getpid())"
        defer {
            try? FileManager.default.removeItem(atPath: pamFile)
            try? FileManager.default.removeItem(atPath: sudoersFile)
        }
        try writeTestFile(
            pamFile,
            Data(
                """
                auth required \(try PAMFixture.module) mode=confirm config=\(fixture.serverConfig) timeout=30
                account required pam_permit.so
                session required pam_permit.so

                """.utf8), mode: 0o644)
        try writeTestFile(sudoersFile, Data("Defaults:\(user) pam_service=\(service)\n\(user) ALL=(ALL) ALL\n".utf8), mode: 0o440)
        let check = try ChildProcess("/usr/sbin/visudo", ["-c", "-f", sudoersFile], in: fixture.laptop.directory).wait()
        #expect(check.status == 0, "\(check.stdout)\(check.stderr)")

        let sudo = try PseudoTerminal(
            "/usr/sbin/runuser", ["-u", user, "--", "/usr/bin/sudo", "-k", "/usr/bin/id", "-un"],
            environment: ["PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "TERM": "xterm"])
        let code = String(try sudo.expect(matching: #"type the code \d{6}"#).suffix(6))
        let approval = try fixture.approve(code: code)
        #expect(approval.status == 0, "\(approval.stderr)")
        try sudo.expect("\nroot")
        #expect(try sudo.wait() == 0, "\(sudo.output)")
        #expect(!sudo.output.contains("Press Enter"), "outside sshd the module waits by itself")
    }
}
