import Foundation
import Testing
import XignLogin

/// A conversation with its answers written in advance, for logins run in this process. It keeps what the login
/// said, one "[STYLE] text" line per message as the libpam harness prints them, and `finish()` records a test
/// failure for every answer the login did not ask for: a script that says more than the login asks is wrong too.
final class ScriptedConversation: Conversation, @unchecked Sendable {
    private var answers: [String]
    private(set) var transcript: [String] = []

    init(answers: [String]) { self.answers = answers }

    func ask(_ text: String, echo: Bool) throws -> String {
        transcript.append("[\(echo ? "PROMPT_ECHO_ON" : "PROMPT_ECHO_OFF")] \(text)")
        guard !answers.isEmpty else {
            Issue.record("the login asked '\(text)', and the script has no answer left")
            throw ConversationFailed()
        }
        return answers.removeFirst()
    }

    func show(_ text: String, isError: Bool) throws {
        transcript.append("[\(isError ? "ERROR_MSG" : "TEXT_INFO")] \(text)")
    }

    /// The answers nobody asked for; each is also a recorded failure.
    @discardableResult
    func finish(sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        for answer in answers {
            Issue.record("the scripted answer '\(answer)' was never asked for", sourceLocation: sourceLocation)
        }
        return answers
    }
}
