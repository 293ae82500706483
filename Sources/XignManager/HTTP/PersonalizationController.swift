import Hummingbird
import XignProtocol

/// Personalization: the activation PIN check, then the device-signed personalization.
struct PersonalizationController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.personalizationDecrypt)) { request, _ in
            Response.jose(try await manager.decrypt(try await request.decodeBody(as: DecryptRequest.self)))
        }
        router.post(RouterPath(APIPath.personalizations)) { request, _ in
            Response.jose(try await manager.personalize(body: try await request.collectBody(), signature: request.signatureHeader))
        }
    }
}
