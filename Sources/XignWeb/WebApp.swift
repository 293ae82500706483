import Foundation
import HTTPTypes
import Hummingbird
import Mustache

/// What the pages need to know of the manager: the address users know it by, which is also the passkeys' home.
public struct WebSite: Sendable {
    /// `scheme://host[:port]` of the manager's public URL.
    public var origin: String
    /// The WebAuthn RP id: the public URL's host.
    public var relyingPartyId: String
    /// The JSON API's paths the script calls, by name (the manager's `APIPath`).
    public var apiPaths: [String: String]

    public init(origin: String, relyingPartyId: String, apiPaths: [String: String]) {
        self.origin = origin
        self.relyingPartyId = relyingPartyId
        self.apiPaths = apiPaths
    }
}

/// The manager's web app for browsers as devices: the App-Link pages (`/link/personalize`, `/c`), one script and one
/// stylesheet. Pages are the same for everyone; what is personal arrives in the fragment (never sent to a server)
/// and through the JSON API, which the script calls with the browser's passkey.
public struct WebApp<Context: RequestContext>: Sendable {
    let site: @Sendable () -> WebSite
    let pages: MustacheLibrary

    public init(site: @escaping @Sendable () -> WebSite) throws {
        self.site = site
        var pages = MustacheLibrary()
        for (name, template) in WebFiles.templates { try pages.register(template, named: name) }
        self.pages = pages
    }

    public func addRoutes(to router: Router<Context>) {
        for (path, page) in [
            (WebPath.personalize, "personalize"), (WebPath.approve, "approve"), (WebPath.approveInQRCode, "approve"),
            (WebPath.account, "account"), (WebPath.register, "register"), (WebPath.notMe, "not-me"),
        ] {
            router.get(RouterPath(path)) { _, _ in try render(page) }
        }
        router.get(RouterPath(WebPath.script)) { request, _ in
            Self.asset(WebFiles.script, type: "text/javascript; charset=utf-8", asked: request)
        }
        router.get(RouterPath(WebPath.stylesheet)) { request, _ in
            Self.asset(WebFiles.stylesheet, type: "text/css; charset=utf-8", asked: request)
        }
    }

    private func render(_ page: String) throws -> Response {
        try render(page, adding: [:], status: .ok, headers: Self.headers(type: Self.html))
    }

    func render(
        _ page: String, adding values: [String: Any], status: HTTPResponse.Status, headers: HTTPFields
    ) throws -> Response {
        let current = site()
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let api = String(decoding: try encoder.encode(current.apiPaths), as: UTF8.self)
        let site: [String: Any] = [
            "origin": current.origin, "rpId": current.relyingPartyId, "api": api,
            "script": WebPath.script + "?v=" + WebFiles.version,
            "stylesheet": WebPath.stylesheet + "?v=" + WebFiles.version,
        ]
        guard let html = pages.render(site.merging(values) { mine, _ in mine }, withTemplate: page) else {
            throw HTTPError(.internalServerError)
        }
        return Response(status: status, headers: headers, body: .init(byteBuffer: .init(string: html)))
    }

    static var html: String { "text/html; charset=utf-8" }

    /// The script or the stylesheet. Asked for by this version's URL (what every page names), a browser keeps it
    /// for a year: the same for everyone, and a new version has a new URL. Asked for otherwise, it is not kept.
    private static func asset(_ text: String, type: String, asked request: Request) -> Response {
        var fields = headers(type: type)
        if request.uri.queryParameters.get("v") == WebFiles.version {
            fields[.cacheControl] = "public, max-age=31536000, immutable"
        }
        return Response(status: .ok, headers: fields, body: .init(byteBuffer: .init(string: text)))
    }

    /// Nothing but our own script and stylesheet may run or load, no other site may frame a page or read where it
    /// came from, and no cache keeps a page (the files of a version excepted, `asset`).
    static func headers(type: String, formAction: String = "'none'") -> HTTPFields {
        [
            .contentType: type,
            .contentSecurityPolicy:
                "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action \(formAction); base-uri 'none'; frame-ancestors 'none'",
            HTTPField.Name("Referrer-Policy")!: "no-referrer",
            HTTPField.Name("X-Content-Type-Options")!: "nosniff",
            HTTPField.Name("X-Frame-Options")!: "DENY",
            HTTPField.Name("Cross-Origin-Opener-Policy")!: "same-origin",
            .cacheControl: "no-store",
        ]
    }
}

/// Where the web app's pages and files are.
public enum WebPath {
    /// The activation link's page (the App-Link of the activation data).
    public static let personalize = "/link/personalize"
    /// The approval page of a login request (the App-Link a host shows).
    public static let approve = "/c"
    /// The same, as a QR code writes it (upper case stays in QR alphanumeric mode).
    public static let approveInQRCode = "/C"
    /// The account: the logins that wait, the devices, removing one, changing the PIN.
    public static let account = "/account"
    /// Registration through the organization's identity provider, for a phone without a Linux machine.
    public static let register = "/register"
    /// A registration notice mail's "not me" link; its token is in the fragment.
    public static let notMe = "/link/not-me"
    /// The administrator's console: its sign-in page; the others are under it.
    public static let console = "/console"
    public static let consoleAccounts = "/console/accounts"
    public static let consoleAudit = "/console/audit"
    public static let consoleAuditCSV = "/console/audit.csv"
    public static let consoleHosts = "/console/hosts"
    public static let consoleHealth = "/console/health"
    public static let consoleWaiting = "/console/waiting"
    public static let script = "/web/app.js"
    public static let stylesheet = "/web/app.css"
}
