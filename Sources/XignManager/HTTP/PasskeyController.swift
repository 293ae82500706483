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
                try await request.decodeBody(as: ConfirmationViewRequest.self), from: request.clientAddress(context, trustedProxies: proxies))
            return try Response.json(.ok, view)
        }
        router.post(RouterPath(APIPath.confirmationApproval)) { request, _ in
            Response.jose(try await manager.approveConfirmation(body: try await request.collectBody(), signature: request.signatureHeader))
        }
    }
}
