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
