import Foundation
import XignProtocol

/// Mail the manager sends, as RFC 5322 messages. The queue is the `mail_queue` table (MailQueue); without
/// an SMTP relay a queued message is delivered into this maildir (`new/`), one file each, for a local MTA or the admin.
public struct Outbox: Sendable {
    public let path: String

    public init(path: String) { self.path = path }

    public struct Mail: Sendable {
        var to: String
        var subject: String
        var headers: [(String, String)] = []
        var body: String
    }

    /// The RFC 5322 text of `mail`, with a unique Message-ID.
    static func message(_ mail: Mail, from: String, id: String) -> String {
        var text = "From: \(from)\r\nTo: \(mail.to)\r\nSubject: \(mail.subject)\r\n"
        text += "Date: \(rfc5322Date())\r\nMessage-ID: <\(id)@xign-manager>\r\n"
        text += "MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n"
        for (key, value) in mail.headers { text += "\(key): \(value)\r\n" }
        return text + "\r\n" + mail.body.replacingOccurrences(of: "\n", with: "\r\n")
    }

    /// Writes a message with tmp/ then a rename into new/, as maildir readers expect. Returns its path.
    @discardableResult
    func deliver(message: String, id: String, createdAt: Int64) throws -> String {
        for sub in ["tmp", "new", "cur"] { try AtomicFile.makeDirectory("\(path)/\(sub)", mode: 0o700) }
        let name = "\(createdAt).\(id).xign"
        let temporary = "\(path)/tmp/\(name)"
        let final = "\(path)/new/\(name)"
        try AtomicFile.write(Data(message.utf8), to: temporary, mode: 0o600)
        guard rename(temporary, final) == 0 else {
            throw ManagerError.internalFailure("cannot move mail into \(path)/new: \(String(cString: strerror(errno)))")
        }
        return final
    }

    static func rfc5322Date() -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss Z"
        return formatter.string(from: Date())
    }

    /// Every enrolment and removal of a device is told to the account, so one the user did not make is noticed.
    static func deviceNotice(to email: String, alias: String, device: String, added: Bool) -> Mail {
        let body = """
            Hello,

            \(added ? "a device was enrolled for" : "a device was removed from") your XignIn activation "\(alias)":

                \(device)

            If this was not you, tell your administrator now: \(added
                ? "they can revoke the device and lock the activation."
                : "someone with that device and your PIN may have removed it.")

            """
        return Mail(
            to: email,
            subject: added
                ? "A device was enrolled for your XignIn account" : "A device was removed from your XignIn account",
            body: body)
    }

    /// A registration through an identity provider made an account for this address: said before the activation is
    /// handed over, with a link that cancels it, so that a registration the address's owner did not start is noticed
    /// and undone (docs/security.md, H1).
    static func registrationNotice(
        to email: String, alias: String, provider: String, startedAt: Int64, startedFrom: String?, cancelLink: String
    ) -> Mail {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm 'UTC'"
        let started = formatter.string(from: Date(timeIntervalSince1970: Double(startedAt) / 1000))
        let body = """
            Hello,

            your sign-in at \(provider) registered "\(alias)" as a device of your XignIn account \(email). The registration
            was started at \(started)\(startedFrom.map { " from \($0)" } ?? "").

            If this was you, there is nothing to do.

            If it was not you, open this link at once: it cancels the registration, and removes the device if it was
            activated already. Then tell your administrator.

                \(cancelLink)

            """
        return Mail(to: email, subject: "A device was registered for your XignIn account", body: body)
    }

    static func activationMail(
        to email: String, alias: String, payload: PersonalizationPayload, backup: Bool = false
    ) -> Mail {
        let body = """
            Hello,

            \(backup ? "here is a backup of the activation" : "your XignIn account is ready. Activate") "\(alias)" on your Linux machine with:

                xign-setup personalize --mail THIS-MAIL-FILE

            or paste this link into `xign-setup personalize`:

                \(payload.deepLink)

            A phone with the XignIn app can scan the QR code that `xign-setup qr` draws from the link,
            or open: \(payload.appLink)

            You will be asked for the activation PIN you chose at registration. Nobody from
            your organization will ever ask you for it.

            """
        return Mail(
            to: email,
            subject: backup ? "Backup of your XignIn activation \"\(alias)\"" : "Activate your XignIn device",
            headers: [(PersonalizationPayload.mailHeader, payload.deepLink)],
            body: body
        )
    }
}
