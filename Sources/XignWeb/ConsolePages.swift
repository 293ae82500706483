import Foundation
import HTTPTypes
import Hummingbird

/// The console's pages, rendered on the server with what the signed-in administrator may see. The manager hands
/// each page its values already made safe to show (DisplayText.marked); the template escapes them for HTML.
public enum ConsolePage: String, Sendable {
    case signIn = "console-signin"
    case denied = "console-denied"
    case accounts = "console-accounts"
    case account = "console-account"
    case audit = "console-audit"
    case hosts = "console-hosts"
    case health = "console-health"
    case waiting = "console-waiting"

    /// What the script does on the page (its `data-page`).
    var script: String {
        switch self {
        case .signIn: "console"
        case .account, .accounts, .hosts: "console-account"
        case .denied, .audit, .health, .waiting: "console-list"
        }
    }
}

extension WebApp {
    /// A console page; `values` fill its template (`title`, `user`, and the page's own).
    public func console(
        _ page: ConsolePage, _ values: [String: Any], status: HTTPResponse.Status = .ok
    ) throws -> Response {
        var values = values
        values["page"] = page.script
        // Its search forms submit to the console itself, by GET; a POST from a form is refused by the manager.
        return try render(
            page.rawValue, adding: values, status: status, headers: Self.headers(type: Self.html, formAction: "'self'"))
    }

    /// The page a person who signed in at an identity provider confirms a registration on: who they are, what is to
    /// become a device of theirs, when and from where it started, and the code. `cookie` binds the browser to it.
    public func registrationConfirmation(
        provider: String, email: String, alias: String, startedAt: Int64, startedFrom: String?, cookie: String
    ) throws -> Response {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss 'UTC'"
        var headers = Self.headers(type: Self.html)
        headers[.setCookie] = cookie
        var values: [String: Any] = [
            "provider": provider, "email": email, "alias": alias, "startedAt": startedAt,
            "startedAtText": formatter.string(from: Date(timeIntervalSince1970: Double(startedAt) / 1000)),
        ]
        if let startedFrom { values["startedFrom"] = startedFrom }
        return try render("register-confirm", adding: values, status: .ok, headers: headers)
    }

    /// A page that only says something: the end of a registration at an identity provider.
    public func notice(title: String, message: String, status: HTTPResponse.Status) throws -> Response {
        try render(
            "notice", adding: ["title": title, "message": message, "noticeClass": status == .ok ? "" : "error"],
            status: status, headers: Self.headers(type: Self.html))
    }

    /// The audit as CSV, for a spreadsheet. A cell that a spreadsheet would read as a formula is quoted with `'`.
    public static func csv(_ rows: [[String]]) -> Response {
        let text = rows.map { $0.map(Self.cell).joined(separator: ",") }.joined(separator: "\r\n") + "\r\n"
        var headers = Self.headers(type: "text/csv; charset=utf-8")
        headers[.contentDisposition] = "attachment; filename=\"xign-audit.csv\""
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: .init(string: text)))
    }

    static func cell(_ value: String) -> String {
        var value = value
        if let first = value.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { value = "'" + value }
        return "\"" + value.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}
