import Foundation
import Testing
import XignCore
import XignTestSupport

/// `xign-setup doctor` reads the real sshd's effective configuration (`sshd -T`, defaults and all): a key alone must
/// not get past the approval.
@Suite struct DoctorSSHDTests {
    let directory = TemporaryDirectory()

    /// doctor's `sshd` item for an sshd_config of `lines` (with a host key of its own).
    func sshdItem(_ lines: String) throws -> [String: Any] {
        let key = directory.file("host_key")
        if !FileManager.default.fileExists(atPath: key) {
            let keygen = try ChildProcess(
                "/usr/bin/ssh-keygen", ["-q", "-t", "ed25519", "-N", "", "-f", key], in: directory
            ).wait()
            guard keygen.status == 0 else { throw TestFailure("ssh-keygen: \(keygen.stderr)") }
        }
        let config = try directory.write("sshd_config", "HostKey \(key)\n" + lines)
        let result = try ChildProcess(
            try Products.path("xign-setup"),
            [
                "doctor", "--json", "--state-dir", directory.file("state"), "--pam-dir", directory.path,
                "--config", try directory.write("xign.conf", "device_key = software\n"), "--sshd-config", config,
            ], in: directory
        ).wait()
        let json = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [String: Any]
        let items = json?["items"] as? [[String: Any]] ?? []
        return try #require(items.first { $0["name"] as? String == "sshd" }, "\(result.stdout)\(result.stderr)")
    }

    @Test func aKeyAloneWarnsAndTheRecommendedSetupIsOK() throws {
        // The README's old setup: Debian's default takes keys, and nothing asks for more.
        let keys = try sshdItem("UsePAM yes\nKbdInteractiveAuthentication yes\nPasswordAuthentication no\n")
        #expect(keys["status"] as? String == "warning")
        #expect(
            (keys["detail"] as? String)?.hasPrefix("publickey logs in without pam_xign's approval") == true, "\(keys)")
        #expect((keys["hint"] as? String)?.contains("AuthenticationMethods publickey,keyboard-interactive") == true)

        let passwords = try sshdItem(
            "UsePAM yes\nPubkeyAuthentication no\nPasswordAuthentication yes\nAuthenticationMethods any\n")
        #expect((passwords["detail"] as? String)?.contains("password") == true, "\(passwords)")

        let recommended = try sshdItem(
            "UsePAM yes\nKbdInteractiveAuthentication yes\nPasswordAuthentication no\nAuthenticationMethods publickey,keyboard-interactive\n"
        )
        #expect(recommended["status"] as? String == "ok", "\(recommended)")
        let approvalOnly = try sshdItem(
            "UsePAM yes\nKbdInteractiveAuthentication yes\nAuthenticationMethods keyboard-interactive\n")
        #expect(approvalOnly["status"] as? String == "ok", "\(approvalOnly)")
        // A list that takes either a key alone or the approval still lets the key alone in.
        let either = try sshdItem(
            "UsePAM yes\nKbdInteractiveAuthentication yes\nAuthenticationMethods publickey keyboard-interactive\n")
        #expect(either["status"] as? String == "warning", "\(either)")

        let noPAM = try sshdItem("UsePAM no\nAuthenticationMethods keyboard-interactive\n")
        #expect(noPAM["status"] as? String == "failure", "\(noPAM)")
    }

    /// On a joined host doctor reads `sudo -V` (as root): Debian's default timestamp of 15 minutes lets sudos past the
    /// approval and warns; the README's `Defaults timestamp_timeout=0` (in a sudoers of this mount namespace) is ok.
    @Test func sudosOwnTimestampWarnsUntilItIsZero() throws {
        let debian = try ChildProcess("/usr/bin/sudo", ["-V"], in: directory).wait()
        try #require(debian.stdout.contains("Authentication timestamp timeout: 15.0 minutes"), "\(debian.stdout)")
        let warned = XignCore.Diagnosis.sudo(settings: debian.stdout)
        #expect(warned.status == .warning && warned.detail.contains("15.0 minutes"), "\(warned)")

        let sudoers = try directory.write(
            "sudoers",
            try String(contentsOfFile: "/etc/sudoers", encoding: .utf8) + "Defaults timestamp_timeout=0\n", mode: 0o440)
        let zero = try ChildProcess(
            "/usr/bin/unshare",
            ["--mount", "/bin/sh", "-c", "mount --bind \(sudoers) /etc/sudoers && exec /usr/bin/sudo -V"], in: directory
        ).wait()
        #expect(XignCore.Diagnosis.sudo(settings: zero.stdout).status == .ok, "\(zero.stdout)\(zero.stderr)")
    }
}
