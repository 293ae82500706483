import Foundation
import Testing
import XignTerminal
import XignTestSupport

@Suite struct QRTests {
    let directory = TemporaryDirectory()
    static let payload =
        "xign://personalize?v=1&m=https%3A%2F%2Fidm.example.org%3A8443&a=0123456789abcdef0123456789abcdef&s=\(String(repeating: "Q", count: 43))&k=\(String(repeating: "z", count: 43))"

    @Test func theCompactActivationFormForAShortURLFitsAn80By24TerminalWithThreeLinesOfText() throws {
        // XIGN://P/<id>/<secret>/<fingerprint>/<URL>, as docs/protocol.md gives it: 26 base32 characters each.
        let compact =
            "XIGN://P/AERUKZ4JVPG66AJDIVTONK5PXMA4DQODQHA4DQODQHA4DQODQHA4BEEQSCIJBEEQSCIJBEEQSCIJBE/HTTP://127.0.0.1:48440"
        #expect(QRRenderer.lines(for: try QRCode(encoding: compact)) + 3 > 24, "at level M it is a version 5 code")
        let code = try QRCode(encoding: compact, level: .low)
        #expect(
            code.paddedSize <= 80 && QRRenderer.lines(for: code) + 3 <= 24,
            "at level L it fits: \(code.paddedSize) modules")
        let drawn = try QRRenderer.render(compact, style: .utf8, columns: 80, rows: 24, besideLines: 3)
        #expect(try QRReader.decode(bitmap: try QRReader.bitmap(fromTerminalText: drawn), in: directory) == compact)
        #expect(throws: QRRenderer.TooTall.self, "the long form fits at neither level") {
            try QRRenderer.render(Self.payload, style: .utf8, columns: 80, rows: 24, besideLines: 3)
        }
    }

    @Test(arguments: QRStyle.allCases)
    func whatTheTerminalShowsDecodesToThePayload(style: QRStyle) throws {
        let code = try QRCode(encoding: Self.payload)
        let text = try QRRenderer.render(code, style: style, columns: 80)
        let lines = text.split(separator: "\n")
        #expect(lines.count == (code.paddedSize + 1) / 2)
        let bitmap = try QRReader.bitmap(fromTerminalText: text, inverted: style == .utf8Inverted)
        // The quiet zone: four light modules on every side.
        #expect(bitmap.prefix(4).allSatisfy { !$0.contains(true) })
        #expect(bitmap.allSatisfy { !$0.prefix(4).contains(true) && !$0.suffix(4).contains(true) })
        #expect(try QRReader.decode(bitmap: bitmap, in: directory) == Self.payload)
    }

    @Test func the331ByteLimitFitsIn80Columns() throws {
        let code = try QRCode(encoding: String(repeating: "x", count: 331))
        #expect(code.paddedSize <= 80)
        #expect(
            try QRReader.decode(
                bitmap: QRReader.bitmap(fromTerminalText: QRRenderer.render(code, style: .utf8, columns: 80)),
                in: directory)
                == String(repeating: "x", count: 331))
    }

    @Test func aCodeTooWideForTheTerminalIsRefusedWithAHint() throws {
        let code = try QRCode(encoding: String(repeating: "y", count: 600))
        #expect(throws: QRRenderer.TooWide(needed: code.paddedSize, available: 80)) {
            try QRRenderer.render(code, style: .ansi, columns: 80)
        }
        #expect("\(QRRenderer.TooWide(needed: 97, available: 80))".contains("--png"))
    }

    @Test func pngExportDecodes() throws {
        let path = directory.file("code.png")
        try writeTestFile(path, PNGWriter.png(for: QRCode(encoding: Self.payload), scale: 4))
        #expect(try QRReader.zbarimg(path, in: directory) == Self.payload)
    }

    @Test func emptyAndOversizedPayloadsAreErrors() {
        #expect(throws: QRCode.EncodingError.self) { try QRCode(encoding: "") }
        #expect(throws: QRCode.EncodingError.self) { try QRCode(encoding: String(repeating: "a", count: 4000)) }
    }
}
