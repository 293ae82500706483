import XignProtocol

/// Talks to the user. Under PAM this is the application's conversation function; under xignd, the caller's, relayed.
public protocol Conversation {
    /// Asks and returns the answer; throws when the conversation fails.
    func ask(_ text: String, echo: Bool) throws -> String
    /// Shows text; an error is shown as such.
    func show(_ text: String, isError: Bool) throws
}

/// The conversation failed: the user or the application went away.
public struct ConversationFailed: Error {
    public init() {}
}

/// The conversation as a login uses it. Every text quotes the manager somewhere (aliases, names, messages), so none
/// reaches the user's terminal with control characters or escape sequences (DisplayText).
struct LoginDialogue {
    let conversation: any Conversation
    let service: String?
    /// PAM_SILENT: `tell` says nothing, errors included; `instruct`, `ask` and `show` still do.
    let silent: Bool

    func ask(_ text: String, echo: Bool) throws -> String {
        // GNOME's own greeter takes no plain question once it was sent JSON, and JSON must come first: every question
        // goes as a PIN entry (the shell hides what is typed; the module asks nothing else that needs echo there).
        if selection != nil {
            let answer = try select(AuthSelection.pin(DisplayText.sanitized(text)))
            guard let pin = answer.pin?.password else { throw ConversationFailed() }
            return pin
        }
        do { return try conversation.ask(DisplayText.sanitized(text), echo: echo) } catch { throw ConversationFailed() }
    }

    /// How many JSON messages the greeter was sent.
    let exchanges = Exchanges()
    final class Exchanges { var count = 0 }

    /// GNOME's own greeter (gnome-shell 51), where GDM offers JSON: nil elsewhere.
    var selection: (any AuthSelectionConversation)? { conversation as? any AuthSelectionConversation }

    /// Shows `mechanism` on GNOME's own greeter and returns the greeter's `Ok` for it; throws when the greeter reset
    /// (its back button, its timeout) or answered anything else.
    func select(_ mechanism: (id: String, AuthSelection.Mechanism)) throws -> AuthSelection.Reply.Selection {
        guard let selection else { throw ConversationFailed() }
        exchanges.count += 1
        let reply: String
        do { reply = try selection.select(try AuthSelection.request(mechanism)) } catch { throw ConversationFailed() }
        guard let chosen = AuthSelection.reply(reply, for: mechanism.id) else { throw ConversationFailed() }
        return chosen
    }

    func show(_ text: String, isError: Bool) throws {
        if showsNoText && !isError { return }
        do { try conversation.show(DisplayText.sanitized(text), isError: isError) } catch { throw ConversationFailed() }
    }

    /// OpenSSH shows PAM_TEXT_INFO only after the next prompt (its bug 2876), so under sshd text that must be seen
    /// now goes into a prompt.
    var showsTextOnlyWithPrompts: Bool { service == "sshd" }

    /// SDDM (0.19) shows no text from PAM: it logs messages and turns an error into "Login failed". An info message
    /// alone, followed by a prompt, even makes it expect a password change and never answer that prompt, which hangs
    /// the greeter (PamData::handleInfo). So under SDDM only errors are sent; they reach its log.
    var showsNoText: Bool { service == "sddm" }

    /// Why a login ended, or what holds it up: the user should see it now, unless the application asked for silence.
    func tell(_ text: String, isError: Bool) {
        if !silent { instruct(text, isError: isError) }
    }

    /// Text the user must see now to go on.
    func instruct(_ text: String, isError: Bool) {
        if showsTextOnlyWithPrompts {
            _ = try? ask(text + " Press Enter.", echo: true)
        } else {
            try? show(text, isError: isError)
        }
    }
}
