import ArgumentParser
import Foundation
import Testing
@testable import xign_setup
import XignTestSupport

/// QR codes as a terminal of a given size shows them: all of the code fits with its text, or it is left out
/// with a pointer to --png; what fits decodes with zbarimg.
@Suite struct QRFitTests {
    /// The terminal lines of what a program printed, without the carriage returns a pty adds.
    func screen(_ terminal: PseudoTerminal) -> String { terminal.output.replacingOccurrences(of: "\r", with: "") }

    @Test func anActivationLinkIsDrawnWhereItFitsAndLeftOutWhereItWouldScrollAway() throws {
        let setup = try Setup()
        try setup.register("fit@example.org")
        let link = try setup.manager.activationLink(for: "fit@example.org")
        let tall = try PseudoTerminal(try Products.path("xign-setup"), ["qr", link], columns: 80, rows: 60)
        #expect(try tall.wait() == 0)
        #expect(try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: screen(tall)), in: setup.directory) == link)
        let small = try PseudoTerminal(try Products.path("xign-setup"), ["qr", link], columns: 80, rows: 24)
        #expect(try small.wait() == ExitCode.failure.rawValue)
        #expect(screen(small).contains("terminal has 24, so its top would scroll away") && screen(small).contains("--png"), "\(screen(small))")
    }

    @Test func personalizeInAn80By24TerminalLeavesTheCodeOutAndStillActivates() throws {
        let setup = try Setup()
        try setup.register("small@example.org")
        let terminal = try PseudoTerminal(try Products.path("xign-setup"), [
            "personalize", "--mail", try setup.manager.mailPath(for: "small@example.org"), "--user", "alice", "--state-dir", setup.state,
        ], columns: 80, rows: 24)
        try terminal.expect("PIN")
        #expect(screen(terminal).contains("QR code not shown: the QR code and its text need"), "\(screen(terminal))")
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
        #expect(try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: drawn), in: setup.directory) == payload)
    }
}
