import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import xign_setup

/// The activation PIN chosen at the terminal, typed twice.
func typePIN(_ terminal: PseudoTerminal, _ pin: String = "24680") throws {
    try terminal.expect("Choose an activation PIN")
    terminal.send(pin + "\r")
    try terminal.expect("Repeat the PIN")
    terminal.send(pin + "\r")
}

/// `xign-setup register --identity-provider` as a person at a terminal runs it, against the real manager and
/// Debian's glewlwyd as the organization's provider: the PIN typed twice, the link's QR code (read back with zbarimg)
/// opened by the person's browser (Chromium), which signs in at the provider and comes back to the manager's page,
/// where the person types the code the terminal shows; then the machine is activated.
@Suite struct ProviderRegisterTests {
    func screen(_ terminal: PseudoTerminal) -> String { terminal.output.replacingOccurrences(of: "\r", with: "") }

    /// H8: the person takes 40 s at the provider, four times the client's 10 s timeout: the terminal waits on, with
    /// no error, until the registration is confirmed.
    @Test func aPersonRegistersAtTheTerminalThroughTheProviderAndThisMachineIsActivated() throws {
        let port = try ManagerProcess.freePort()
        let url = "http://localhost:\(port)"
        let provider = try OpenIDProviderServer(callback: url + APIPath.providerRegistrationCallback)
        let manager = try ManagerProcess(
            config: try provider.managerConfig(publicURL: url, base: ManagerProcess.testConfig), port: port)
        let directory = TemporaryDirectory()
        let terminal = try PseudoTerminal(
            try Products.path("xign-setup"),
            [
                "register", "--manager", url, "--identity-provider", "corp", "--alias", "Laptop", "--state-dir",
                directory.file("state"),
            ], columns: 100, rows: 60)
        try typePIN(terminal)
        try terminal.expect("Waiting for the sign-in and the code")
        let shown = screen(terminal)
        let drawn = (shown.components(separatedBy: "Or scan it with your phone:").last ?? "").split(
            separator: "\n", omittingEmptySubsequences: false
        ).dropFirst().prefix { !$0.hasPrefix("After the sign-in") }.joined(separator: "\n")
        let link = try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: drawn), in: directory)
        #expect(link.hasPrefix(provider.issuer + "/auth?") && shown.contains(link), "\(shown)")
        let said = try #require(
            shown.components(separatedBy: "the manager's page asks for this code: ").last?.prefix { $0 != "\n" })
        let code = String(said.filter(\.isNumber))
        #expect(code.count == 6, "\(shown)")

        Thread.sleep(forTimeInterval: 40)
        #expect(
            terminal.finished == nil && screen(terminal) == shown,
            "still waiting, nothing more said: \(screen(terminal))")
        let location = try provider.signIn("nina", password: "nina-pass-1", at: link)
        let browser = Browser(in: directory, name: "nina")
        let confirmed = try browser.confirmRegistration(location, answers: [code])
        #expect(confirmed.status.contains("Registered as nina@example.org"), "\(confirmed)")
        try terminal.expect("Personalized", timeout: 60)
        #expect(try terminal.wait() == 0, "\(screen(terminal))")
        #expect(screen(terminal).contains("Registered as nina@example.org with the login name nina"))
        #expect(
            try manager.query("SELECT a.alias, a.state FROM activations a JOIN accounts c ON c.id = a.account_id")
                == ["Laptop|personalized"])
    }
}

/// The custom API provider at the terminal: the person types each step's data as the organization's service asks.
@Suite struct CustomProviderRegisterTests {
    @Test func aPersonAnswersBothStepsAtTheTerminalAndThisMachineIsActivated() throws {
        let service = try RegistrationService()
        let manager = try ManagerProcess(
            config: """
                \(ManagerProcess.testConfig)
                [identity_providers]
                names = hr
                \(try service.providerSection("hr", steps: 2, extra: "name = HR check\nlogin_name_claim = login"))
                """)
        let directory = TemporaryDirectory()
        let terminal = try PseudoTerminal(
            try Products.path("xign-setup"),
            [
                "register", "--manager", manager.url.description, "--identity-provider", "hr", "--state-dir",
                directory.file("state"),
            ], columns: 100, rows: 40)
        try typePIN(terminal)
        try terminal.expect("Registration data for the organization's service")
        terminal.send("employee 42\r")
        try terminal.expect("Type the code HR sent to employee 42")
        terminal.send("314159\r")
        try terminal.expect("Personalized", timeout: 60)
        #expect(try terminal.wait() == 0, "\(terminal.output)")
        #expect(terminal.output.contains("Registered as emp42@example.org with the login name emp42"))
    }
}
