import HTTPTypes
import Hummingbird
import XignProtocol

/// What the web app's script calls beside the device API: a personalization with a passkey, the look at a login
/// request, and the approval in one request. Device-signed requests take a passkey's assertion everywhere else.
struct PasskeyController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        let proxies = manager.configuration.limits.trustedProxies
        router.post(RouterPath(APIPath.passkeyPersonalizations)) { request, _ in
            Response.jose(try await manager.personalizeWithPasskey(body: try await request.collectBody()))
        }
        router.post(RouterPath(APIPath.confirmationView)) { request, context in
            let view = try await manager.viewConfirmation(
                try await request.decodeBody(as: ConfirmationViewRequest.self),
                from: request.clientAddress(context, trustedProxies: proxies))
            return try Response.json(.ok, view)
        }
        router.post(RouterPath(APIPath.confirmationApproval)) { request, _ in
            Response.jose(
                try await manager.approveConfirmation(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.webSessions)) { request, _ in
            let (token, expiresAt) = try await manager.openWebSession(
                body: try await request.collectBody(), signature: request.signatureHeader)
            var response = try Response.json(.created, WebSessionMessage(expiresAt: expiresAt))
            response.headers[.setCookie] = Request.setCookie(
                Request.sessionCookieName, token, maxAge: IdentityManager.webSessionMilliseconds / 1000)
            return response
        }
        router.post(RouterPath(APIPath.webSessionEnd)) { request, _ in
            try await manager.endWebSession(token: try request.sessionCookie)
            var response = Response(status: .noContent, headers: [.cacheControl: "no-store"])
            response.headers[.setCookie] = Request.setCookie(Request.sessionCookieName, "", maxAge: 0)
            return response
        }
        router.post(RouterPath(APIPath.webPending)) { request, _ in
            try Response.json(
                .ok,
                try await manager.pendingConfirmations(
                    try await request.decodeBody(as: WebPendingRequest.self), session: try request.sessionCookie))
        }
        router.post(RouterPath(APIPath.webDevices)) { request, _ in
            try Response.json(.ok, try await manager.devices(session: try request.sessionCookie))
        }
    }
}

extension Request {
    static let sessionCookieName = "__Host-xign-session"
    static let consoleCookieName = "__Host-xign-console"
    /// Binds a registration through an identity provider to its browser (H1).
    static let registrationCookieName = "__Host-xign-registration"

    /// Only the manager's own pages send it back, never a request another site starts, and no script reads it. The
    /// `__Host-` prefix makes browsers refuse one that names a Domain, another Path or no Secure, so a sibling
    /// subdomain cannot plant its own session here (G8). `lax`: sent also when another site links here (the identity
    /// provider sending the browser back), never with another site's POST.
    static func setCookie(_ name: String, _ token: String, maxAge: Int64, lax: Bool = false) -> String {
        "\(name)=\(token); Path=/; Max-Age=\(maxAge); HttpOnly; Secure; SameSite=\(lax ? "Lax" : "Strict")"
    }

    var sessionCookie: String? { get throws { try cookie(Self.sessionCookieName) } }
    var consoleCookie: String? { get throws { try cookie(Self.consoleCookieName) } }
    var registrationCookie: String? { get throws { try cookie(Self.registrationCookieName) } }

    /// A session's token from the Cookie header, if any. Two are refused: a browser sends a planted cookie beside the
    /// real one, and which one it sends first is not ours to guess.
    private func cookie(_ name: String) throws -> String? {
        var found: [Substring] = []
        for field in headers[values: .cookie] {
            for pair in field.split(separator: ";") {
                let parts = pair.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if parts.count == 2, parts[0] == name { found.append(parts[1]) }
            }
        }
        guard found.count <= 1 else {
            throw ManagerError(
                .badRequest, .badRequest, "the request carries two sessions; sign out and sign in again")
        }
        return found.first.map(String.init)
    }
}
