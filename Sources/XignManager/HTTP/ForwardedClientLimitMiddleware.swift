import Hummingbird

/// Behind a trusted proxy the connection cap counts the proxy, so each client it names in X-Forwarded-For is held
/// here to `connections_per_address` requests at once (long polls included): one client cannot hold the proxy's
/// share, and the others still get through.
struct ForwardedClientLimitMiddleware: RouterMiddleware {
    typealias Context = ManagerRequestContext
    let inFlight = ConnectionsPerAddress()
    let limit: Int
    let trustedProxies: [String]

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        guard let client = request.forwardedAddress(context, trustedProxies: trustedProxies).map(AddressKey.key(for:))
        else {
            return try await next(request, context)
        }
        guard inFlight.admit(client, limit: limit) else {
            throw ManagerError(
                .tooManyRequests, .tooManyRequests,
                "\(limit) requests from your address are open at the manager already; try again when one ended")
        }
        defer { inFlight.release(client) }
        return try await next(request, context)
    }
}
