import Hummingbird
import XignProtocol

/// Registration: the parameters, and a new account.
struct RegistrationController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.get(RouterPath(APIPath.registrationParameters)) { request, _ in
            let mapping = request.uri.queryParameters["serviceMappingId"].map(String.init)
            guard mapping.map({ IdentifierValidator.isValid($0, length: 0...WireLimit.identifier) }) ?? true else {
                throw ManagerError.badRequest(
                    "serviceMappingId must be at most 64 printable ASCII characters without spaces")
            }
            return try Response.json(.ok, manager.registrationParameters(serviceMappingId: mapping))
        }
        router.post(RouterPath(APIPath.registrations)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            return try Response.json(
                .created,
                try await manager.register(try await request.decodeBody(as: RegisterRequest.self), from: client))
        }
    }
}
