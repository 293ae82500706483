import Foundation
import Testing
import XignProtocol
import XignTestSupport

/// Users on every machine, end to end: a person whom only the manager knows logs in to a joined host over SSH for the
/// first time. sshd finds her through libnss_xign (xignd asks the manager at the first lookup), she approves on her
/// phone's browser, pam_mkhomedir makes her home, and sudo lets her in through the local group her host group maps
/// to, with the same confirmation. The host is a mount namespace (JoinedHost): its /home, /etc/pam.d/sudo and
/// nsswitch.conf are its own, so the machine's files are not touched.
@Suite struct FirstLoginTests {
    @Test func aPersonOnlyTheManagerKnowsLogsInOverSSHIntoANewHomeAndUsesSudo() throws {
        let sudoers = try String(contentsOfFile: "/etc/sudoers", encoding: .utf8)
        try #require(sudoers.contains("\n%sudo"), "Debian's sudoers lets the group sudo run sudo")
        #expect(getpwnam("nina") == nil, "nina is not a user of this machine")
        let manager = try ManagerProcess.servingBrowsers()
        let added = try manager.admin(["accounts", "add", "nina@example.org", "--login-name", "nina"])
        let pin = try #require(added.stdout.split(separator: " ").last).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(try manager.admin(["accounts", "set-host-groups", "nina@example.org", "web"]).status == 0)
        #expect(try manager.admin(["groups", "set-local", "web", "sudo"]).status == 0)
        let phone = Browser(in: manager.directory)
        let activated = try phone.personalize(try manager.activationAppLink(for: "nina@example.org"), pin: pin)
        #expect(activated.error.isEmpty, "\(activated)")

        let host = try JoinedHost("web1.example.org", groups: ["web"], manager: manager, refreshSeconds: 3600)
        let module = try PAMFixture.module
        let services = TemporaryDirectory()
        _ = try services.write(
            "sshd",
            """
            auth required \(module) config=\(host.configPath) mode=confirm timeout=60
            account required pam_permit.so
            session required pam_mkhomedir.so umask=0077
            session required pam_permit.so

            """, mode: 0o644)
        let sudo = try host.directory.write(
            "sudo",
            """
            auth required \(module) config=\(host.configPath) mode=confirm timeout=60
            @include common-account
            @include common-session-noninteractive

            """, mode: 0o644)
        for sub in ["home", "home-work"] {
            try FileManager.default.createDirectory(
                atPath: host.directory.file(sub), withIntermediateDirectories: false)
        }
        for line in [
            "mount -t overlay overlay -o lowerdir=/home,upperdir=\(host.directory.file("home")),workdir=\(host.directory.file("home-work")) /home",
            "mount --bind \(sudo) /etc/pam.d/sudo",
        ] {
            let mounted = try host.run(["/bin/sh", "-c", line])
            #expect(mounted.status == 0, "\(line): \(mounted.stderr)")
        }
        let server = try SSHServer(pamServices: services.path, launcher: try host.launcher)
        let uid = try #require(
            try host.run(["/usr/bin/getent", "passwd", "nina"]).stdout.split(separator: ":").dropFirst(2).first)

        let ssh = try server.ssh("nina", "id; pwd; stat -c '%U %a' .; sudo -k id -un", terminal: true)
        let (link, code) = try SSHLoginTests.scanned(ssh, in: services)
        let approved = try phone.approve(link, code: code, pin: pin)
        #expect(approved.status == "Approved. The login to web1.example.org goes on.", "\(approved)")
        ssh.send("\r")
        try ssh.expect("uid=\(uid)(nina) gid=\(uid)(nina) groups=\(uid)(nina),27(sudo)")
        try ssh.expect("/home/nina")
        try ssh.expect("nina 700")
        // sudo asks for the same confirmation; the phone approves it from the account page.
        let second = try waitForSecondCode(ssh)
        let sudoApproved = try phone.approveWaiting(at: manager.browserURL + "/account", code: second, pin: pin)
        #expect(sudoApproved.error.isEmpty, "\(sudoApproved)")
        try ssh.expect("root")
        #expect(try ssh.wait() == 0, "\(ssh.output.suffix(1500))\n\(server.log.suffix(1500))")

        // xignd stuck: sshd still answers a name nobody has, within the module's second per process, and refuses it.
        host.signalDaemon(SIGSTOP)
        let started = Date()
        let stranger = try server.ssh("zed", "true")
        _ = try? stranger.expect("Press Enter", timeout: 20)
        stranger.send("\r")
        let status = try stranger.wait()
        let seconds = Date().timeIntervalSince(started)
        print("ssh as an unknown user with xignd stopped ended after \(String(format: "%.1f", seconds)) s")
        #expect(status != 0 && seconds < 20, "\(stranger.output.suffix(500))")
        #expect(server.log.contains("Invalid user zed"), "\(server.log.suffix(1500))")
    }

    /// The code of the second confirmation the session shows (sudo's).
    func waitForSecondCode(_ ssh: PseudoTerminal) throws -> String {
        var code: String?
        _ = try waitUntil(seconds: 30) {
            let parts = ssh.output.components(separatedBy: "type the code ")
            if parts.count > 2 { code = String(parts[2].prefix(6)) }
            return code != nil
        }
        guard let code, code.allSatisfy(\.isNumber) else {
            throw TestFailure("sudo showed no second code:\n\(ssh.output.suffix(2000))")
        }
        return code
    }
}
