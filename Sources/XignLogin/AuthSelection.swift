import FoundationEssentials

/// A conversation with GNOME's own login screen (gnome-shell 51 and GDM 50 or later, PAM service
/// `gdm-switchable-auth`): it draws a PIN entry or a web login (a QR code of a link, the link, a code and Done) from
/// the `auth-mechanisms` JSON a module sends first, and answers with JSON (GDM's CustomJSON PAM extension).
public protocol AuthSelectionConversation: Conversation {
    /// Sends `request` (`auth-mechanisms`, version 1) and returns the greeter's reply; throws when the greeter reset.
    func select(_ request: String) throws -> String
}

/// The `auth-mechanisms` messages, as gnome-shell 51 reads them (`authServicesSSSDSwitchable.js`): mechanisms by id,
/// each with a role the shell knows (`password`, `eidp`), and a reply that names the chosen id.
enum AuthSelection {
    struct Request: Encodable {
        var authSelection: Selection
        struct Selection: Encodable {
            var mechanisms: [String: Mechanism]
            var priority: [String]
        }
    }

    struct Mechanism: Encodable, Equatable {
        var name: String
        var role: String
        var prompt: String?
        var initPrompt: String?
        var linkPrompt: String?
        var uri: String?
        var code: String?
        /// Seconds until the shell starts over with a new request.
        var timeout: Int?
    }

    struct Reply: Decodable {
        var authSelection: Selection
        struct Selection: Decodable {
            var status: String
            var pin: Secret?
            var eidp: Done?
        }
        struct Secret: Decodable { var password: String }
        struct Done: Decodable {}
    }

    /// A PIN entry with `prompt` (the `password` role: the shell hides what is typed).
    static func pin(_ prompt: String) -> (id: String, Mechanism) {
        ("pin", Mechanism(name: "XignIn PIN", role: "password", prompt: prompt))
    }

    /// A web login: the shell draws `uri` as a QR code and as text, with `code`, until Done or `timeout` seconds.
    static func approval(uri: String, code: String, timeout: Int) -> (id: String, Mechanism) {
        (
            "eidp",
            Mechanism(
                name: "XignIn", role: "eidp", initPrompt: "Approve on an enrolled device",
                linkPrompt: "Scan the code with an enrolled device, or open the link, and type the code there",
                uri: uri, code: code, timeout: max(timeout, 1))
        )
    }

    static func request(_ mechanism: (id: String, Mechanism)) throws -> String {
        let request = Request(
            authSelection: .init(mechanisms: [mechanism.id: mechanism.1], priority: [mechanism.id]))
        return String(decoding: try JSONEncoder().encode(request), as: UTF8.self)
    }

    /// The greeter's reply, or nil where it is not an `Ok` for `id`.
    static func reply(_ text: String, for id: String) -> Reply.Selection? {
        guard let reply = try? JSONDecoder().decode(Reply.self, from: Data(text.utf8)),
            reply.authSelection.status == "Ok"
        else { return nil }
        switch id {
        case "pin": return reply.authSelection.pin == nil ? nil : reply.authSelection
        default: return reply.authSelection.eidp == nil ? nil : reply.authSelection
        }
    }
}
