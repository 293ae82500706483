import Hummingbird
import XignProtocol

/// Personalization: the activation PIN check, then the device-signed personalization.
struct PersonalizationController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.personalizationDecrypt)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            return Response.jose(
                try await manager.decrypt(try await request.decodeBody(as: DecryptRequest.self), from: client))
        }
        router.post(RouterPath(APIPath.personalizations)) { request, _ in
            Response.jose(
                try await manager.personalize(body: try await request.collectBody(), signature: request.signatureHeader)
            )
        }
    }
}
