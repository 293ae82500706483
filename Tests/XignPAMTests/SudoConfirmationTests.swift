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
        let pam = """
            auth required \(try PAMFixture.module) mode=confirm config=\(fixture.serverConfig) timeout=30
            account required pam_permit.so
            session required pam_permit.so

            """
        try RealSudo.withService(for: user, pamLines: pam) {
            let sudo = try RealSudo.run(as: user)
            let code = String(try sudo.expect(matching: #"type the code \d{6}"#).suffix(6))
            let approval = try fixture.approve(code: code)
            #expect(approval.status == 0, "\(approval.stderr)")
            try sudo.expect("\nroot")
            #expect(try sudo.wait() == 0, "\(sudo.output)")
            #expect(!sudo.output.contains("Press Enter"), "outside sshd the module waits by itself")
        }
    }
}
