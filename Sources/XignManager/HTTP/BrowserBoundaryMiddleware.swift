import HTTPTypes
import Hummingbird

/// What keeps a browser from being turned against the API (docs/security.md, G9): a POST must carry JSON, which a
/// form or another site's fetch can send only after a CORS preflight that the manager never answers; a request a
/// browser sends from another origin is refused; and every answer says nosniff, and HSTS where the public URL is
/// https. Errors from inside become answers here, so they carry the same headers.
struct BrowserBoundaryMiddleware<Context: RequestContext>: RouterMiddleware {
    /// The manager's own origin (`scheme://host[:port]` of the public URL), read per request: without a public URL it
    /// is known only once the port is bound.
    let origin: @Sendable () -> String
    let strictTransport: Bool

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        var response: Response
        do {
            try check(request)
            response = try await next(request, context)
        } catch let error as any HTTPResponseError {
            response = try error.response(from: request, context: context)
        }
        response.headers[.contentTypeOptions] = "nosniff"
        if strictTransport { response.headers[.strictTransportSecurity] = "max-age=31536000" }
        return response
    }

    private func check(_ request: Request) throws {
        // Browsers send Origin with every POST and every cross-origin request; other clients send none.
        if let sent = request.headers[.origin], sent != origin() {
            throw ManagerError(
                .forbidden, .badRequest,
                "a page from \(sent.prefix(128)) may not call this manager; open its own pages at \(origin())")
        }
        // An empty POST (ending a web session) may name no type; anything with a body must be JSON.
        if request.method == .post,
            request.headers[.contentType] != nil || request.headers[.transferEncoding] != nil
                || (request.headers[.contentLength].map { $0 != "0" } ?? false)
        {
            let type = request.headers[.contentType]?.split(separator: ";").first?.trimmingCharacters(in: .whitespaces)
                .lowercased()
            guard type == "application/json" else {
                throw ManagerError(
                    .unsupportedMediaType, .badRequest,
                    "a POST to the manager carries JSON: send Content-Type: application/json")
            }
        }
    }
}

extension HTTPField.Name {
    static let contentTypeOptions = HTTPField.Name("X-Content-Type-Options")!
    static let strictTransportSecurity = HTTPField.Name("Strict-Transport-Security")!
}
