import ArgumentParser
import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import xign_setup

/// QR codes as a terminal of a given size shows them: all of the code fits with its text, or it is left out
/// with a pointer to --png; what fits decodes with zbarimg.
@Suite struct QRFitTests {
    /// The terminal lines of what a program printed, without the carriage returns a pty adds.
    func screen(_ terminal: PseudoTerminal) -> String { terminal.output.replacingOccurrences(of: "\r", with: "") }

    @Test func anActivationLinkIsDrawnWhereItFitsAndLeftOutWhereItWouldScrollAway() throws {
        let setup = try Setup()
        try setup.register("fit@example.org")
        let link = try setup.manager.activationLink(for: "fit@example.org")
        #expect(link.hasPrefix(PersonalizationPayload.compactPrefix))
        let fits = try PseudoTerminal(try Products.path("xign-setup"), ["qr", link], columns: 80, rows: 24)
        #expect(try fits.wait() == 0, "\(screen(fits))")
        #expect(
            try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: screen(fits)), in: setup.directory)
                == link)
        // A link of the long form, as older mails carry it, is too tall for 80×24.
        let payload = try PersonalizationPayload(parsing: link)
        let long =
            "xign://personalize?v=1&m=\(PercentEncoding.encode(payload.managerURL.description))&a=\(payload.activationId)"
            + "&s=" + String(repeating: "A", count: 43) + "&k=" + String(repeating: "b", count: 43)
        let small = try PseudoTerminal(try Products.path("xign-setup"), ["qr", long], columns: 80, rows: 24)
        #expect(try small.wait() == ExitCode.failure.rawValue)
        #expect(
            screen(small).contains("terminal has 24, so its top would scroll away") && screen(small).contains("--png"),
            "\(screen(small))")
    }

    @Test func personalizeInAn80By24TerminalShowsTheWholeCodeAndActivates() throws {
        let setup = try Setup()
        try setup.register("small@example.org")
        let mail = try setup.manager.mailPath(for: "small@example.org")
        let terminal = try PseudoTerminal(
            try Products.path("xign-setup"),
            [
                "personalize", "--mail", mail, "--user", "alice", "--state-dir", setup.state,
            ], columns: 80, rows: 24)
        try terminal.expect("PIN")
        let shown = screen(terminal)
        let code = (shown.components(separatedBy: "Activation QR code").last ?? "").split(
            separator: "\n", omittingEmptySubsequences: false
        )
        .dropFirst()
        .prefix { !$0.hasPrefix("Activating") }.joined(separator: "\n")
        #expect(
            try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: code), in: setup.directory)
                == (try PersonalizationPayload(parsingMail: String(contentsOfFile: mail, encoding: .utf8)).deepLink),
            "\(shown)")
        terminal.send("24680\r")
        #expect(try terminal.wait() == 0, "\(screen(terminal))")
        #expect(screen(terminal).contains("Personalized"))
    }

    @Test func aConfirmationPayloadFitsAnyTerminalOf80By24() throws {
        let setup = try Setup()
        let payload = "XIGN://C/" + String(repeating: "A", count: 26)
        let terminal = try PseudoTerminal(try Products.path("xign-setup"), ["qr", payload], columns: 80, rows: 24)
        #expect(try terminal.wait() == 0)
        let drawn = screen(terminal)
        #expect(drawn.split(separator: "\n", omittingEmptySubsequences: false).count <= 24)
        #expect(
            try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: drawn), in: setup.directory) == payload)
    }
}
