import Testing
import XignProtocol

@Suite struct DisplayTextTests {
    @Test(arguments: [
        // CSI (7-bit and 8-bit), OSC ended by BEL and by ST, DCS, a two-byte escape, lone controls.
        ("a\u{1B}[31;1mred\u{1B}[0m", "ared"),
        ("a\u{9B}2Jb", "ab"),
        ("\u{1B}]0;owned\u{07}title", "title"),
        ("\u{1B}]8;;http://evil/\u{1B}\\link\u{1B}]8;;\u{1B}\\", "link"),
        ("\u{9D}0;owned\u{9C}x", "x"),
        ("\u{1B}P+q\u{1B}\\ok", "ok"),
        ("\u{1B}(0box", "box"),
        ("\u{1B}c\u{1B}7\u{1B}8plain", "plain"),
        ("bell\u{07}\u{08}\r\u{7F}\u{85}", "bell"),
        // An unterminated string swallows the rest, as a terminal would.
        ("before\u{1B}]0;title", "before"),
        // Reordering: "txt.exe" shown as "exe.txt".
        ("\u{202E}exe.txt\u{202C}", "exe.txt"),
        ("\u{2066}a\u{2069}\u{200F}", "a"),
        ("tab\there", "tab here"),
    ])
    func escapeSequencesAndControlsAreRemoved(input: String, expected: String) {
        #expect(DisplayText.sanitized(input) == expected)
    }

    @Test func ordinaryTextIsKept() {
        let text = "Jürgen's Laptop — 東京 🔐 (café)\nline two ▀▄█"
        #expect(DisplayText.sanitized(text) == text)
        #expect(DisplayText.sanitized(text, keepingLineFeeds: false) == "Jürgen's Laptop — 東京 🔐 (café)line two ▀▄█")
    }

    @Test func theManagerRefusesNamesItWouldShow() {
        let alias = AliasPolicyMessage(minLength: 2, maxLength: 64)
        #expect(alias.validate("my\u{1B}[2Jlaptop") == .invalid)
        #expect(alias.validate("my\u{9B}2Jlaptop") == .invalid)
        #expect(alias.validate("my\u{202E}laptop") == .invalid)
        #expect(alias.validate("Jürgen's laptop") == .valid)
        #expect(TextAttributeValidator.validate("Rome\u{85}") == .invalid, "C1 NEL")
        #expect(TextAttributeValidator.validate("Rome\u{9D}0;x\u{9C}") == .invalid)
        #expect(TextAttributeValidator.validate("Roma") == .valid)
    }
}
