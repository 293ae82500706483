import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import xign_setup

/// The account page in Chromium beside xign-setup on a laptop: the laptop adds the phone (new-activation), the phone
/// changes the PIN and removes the laptop, and the terminal tools see both.
@Suite struct BrowserAccountTests {
    @Test func aPhoneChangesThePINAndRemovesALostLaptopAndTheTerminalSeesIt() throws {
        let setup = try Setup(servingBrowsers: true)
        try setup.register("alice@example.org")
        let laptop = try setup.personalize("alice@example.org")
        #expect(laptop.exitCode == .success, "\(laptop.stderr)")
        let state = ["--state-dir", setup.state, "--pin-stdin", "--json"]
        let added = try setup.run(
            ["new-activation", "--alias", "Phone", "--send-email"] + state, stdin: "24680\n25814\n")
        #expect(added.exitCode == .success, "\(added.stderr) \(added.stdout)")
        let phone = Browser(in: setup.directory)
        let activated = try phone.personalize(
            try setup.manager.activationAppLink(for: "alice@example.org"), pin: "25814")
        #expect(activated.error.isEmpty && activated["account"] == "alice@example.org (Phone)", "\(activated)")

        let page = "\(setup.manager.browserURL)/account"
        let signedIn = try phone.account(page)
        #expect(signedIn.status == "Signed in as alice@example.org.", "\(signedIn)")
        let devices = signedIn.list("devices")
        #expect(
            devices.count == 2 && devices.contains { $0.contains("software key") && $0.contains("last used") },
            "\(devices)")
        #expect(devices.contains { $0.contains("passkey") && $0.hasSuffix("this browser") }, "\(devices)")

        // The PIN changes for every activation of the account: the laptop's old PIN is now a wrong one.
        let changed = try phone.changePIN(at: page, from: "25814", to: "97531")
        #expect(changed.status.hasPrefix("PIN changed for 2 activation(s)"), "\(changed)")
        let old = try setup.run(["change-pin"] + state, stdin: "24680\n86420\n")
        #expect(old.exitCode == .lockedOut && old.stderr.contains("Wrong PIN"), "\(old.stderr)")
        Thread.sleep(forTimeInterval: 0.4)
        #expect(
            try setup.run(["list", "--devices", "--json", "--state-dir", setup.state]).exitCode == .success,
            "the control: the laptop is enrolled")

        // The laptop is lost: the phone removes it, with the passkey and the (new) PIN.
        let laptopName = try #require(
            devices.first { $0.contains("software key") }?.components(separatedBy: " (").first)
        let wrongPIN = try phone.revoke(laptopName, at: page, pin: "24680")
        #expect(wrongPIN.error.hasPrefix("Wrong PIN"), "\(wrongPIN)")
        Thread.sleep(forTimeInterval: 0.6)
        let removed = try phone.revoke(laptopName, at: page, pin: "97531")
        #expect(removed.status == "Removed \(laptopName); it can no longer log in or approve.", "\(removed)")
        #expect(removed.list("devices").count == 1, "\(removed)")
        let orphan = try setup.run(["list", "--devices", "--json", "--state-dir", setup.state])
        #expect(orphan.exitCode == .failure && orphan.stderr.contains("not enrolled"), "\(orphan.stderr)")
        #expect(
            try setup.manager.query("SELECT detail FROM audit_events WHERE event = 'revocation'").first?.contains(
                "removed by another device") == true
        )
    }
}
