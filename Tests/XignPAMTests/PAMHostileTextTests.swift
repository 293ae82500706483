import Foundation
import Testing
import XignTestSupport

/// What a manager (or a stand-in for one) says reaches the user's terminal through the conversation, so it must
/// not carry escape sequences: a hostile alias or message could clear the screen, retitle the window, or hide
/// the real question behind a fake one (duo_unix #385 let C1 controls through).
@Suite struct PAMHostileTextTests {
    static let hostile =
        "\u{1B}[2J\u{1B}[H\u{1B}]0;pwned\u{07}\u{9B}31m\u{9D}8;;http://evil\u{9C}evil\u{1B}[0m\u{85}\u{202E}\u{90}q\u{9C}\u{7F}"

    /// Every C0 control but the line feed, DEL, every C1 control and the bidirectional overrides.
    static func controls(in text: String) -> [String] {
        text.unicodeScalars.filter { scalar in
            (scalar.value < 0x20 && scalar != "\n") || (0x7F...0x9F).contains(scalar.value)
                || (0x202A...0x202E).contains(scalar.value)
        }.map { String(format: "U+%04X", $0.value) }
    }

    @Test func anAliasFullOfEscapeSequencesReachesThePromptAsPlainText() throws {
        let fixture = try PAMFixture()
        // The alias is what the manager answered at personalization; an older or hostile one may have sent this.
        let path = fixture.state + "/identity-managers.json"
        let stored = try String(contentsOfFile: path, encoding: .utf8)
        let escaped = String(data: try JSONEncoder().encode("alice's laptop" + Self.hostile), encoding: .utf8)!
        try writeTestFile(path, Data(stored.replacingOccurrences(of: "\"alice's laptop\"", with: escaped).utf8))
        let raw = try String(contentsOfFile: path, encoding: .utf8)
        #expect(raw.contains("pwned"), "the planted alias is in the state")

        let login = try fixture.login()
        #expect(login.code == PAMCode.success, "\(login.output)")
        #expect(Self.controls(in: login.output).isEmpty, "\(Self.controls(in: login.output))")
        #expect(
            login.conversation == "[PROMPT_ECHO_OFF] XignIn PIN for alice's laptopevil: ",
            "the visible text stays, the sequences go")
    }

    @Test func aManagersMessageFullOfEscapeSequencesIsShownAsPlainText() throws {
        let fixture = try PAMFixture()
        let message = String(
            data: try JSONEncoder().encode("slow down" + Self.hostile + "\n\u{1B}[1AXignIn PIN for alice: "),
            encoding: .utf8)!
        let standIn = try FaultyServer { _ in
            FaultyServer.http(
                status: 429, body: Array(#"{"error":{"code":"tooManyRequests","message":\#(message)}}"#.utf8))
        }
        try fixture.redirectEnrolments(to: standIn.url)
        for service in ["login", "sshd"] {
            // sshd is a remote login, which mode=local refuses before it asks the manager; this one opts in to get there.
            try fixture.service(service, arguments: service == "sshd" ? "timeout=3 remote=pin-only" : "timeout=3")
            // Under sshd the text is a prompt, answered with Enter; elsewhere nothing is asked.
            let login = try fixture.login(service: service, answers: service == "sshd" ? [""] : [])
            #expect(login.code == PAMCode.authError, "\(login.output)")
            #expect(Self.controls(in: login.output).isEmpty, "\(service): \(Self.controls(in: login.output))")
            #expect(login.conversation.contains("slow downevil"), "\(login.conversation)")
            #expect(
                !login.output.contains("\nXignIn PIN for alice"),
                "a message is one line: it cannot draw a prompt of its own")
        }
    }
}
