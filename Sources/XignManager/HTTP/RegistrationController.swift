import Hummingbird
import XignProtocol

/// Registration: the parameters, and a new account.
struct RegistrationController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.get(RouterPath(APIPath.registrationParameters)) { request, _ in
            let mapping = request.uri.queryParameters["serviceMappingId"].map(String.init)
            guard (mapping?.utf8.count ?? 0) <= 64 else { throw ManagerError.badRequest("serviceMappingId is too long") }
            return try Response.json(.ok, manager.registrationParameters(serviceMappingId: mapping))
        }
        router.post(RouterPath(APIPath.registrations)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            return try Response.json(.created, try await manager.register(try await request.decodeBody(as: RegisterRequest.self), from: client))
        }
    }
}
