import Hummingbird
import XignProtocol

/// Authentication after a /v1/challenges challenge: start (device-signed), finish, token.
struct AuthenticationController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.authentications)) { request, _ in
            Response.jose(
                try await manager.startAuthentication(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.authenticationFinish)) { request, _ in
            Response.jose(
                try await manager.finishAuthentication(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.apiAccess)) { request, _ in
            Response.jose(
                try await manager.finishApiAccess(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.token)) { request, _ in
            Response.jose(try await manager.token(try await request.decodeBody(as: TokenRequest.self)))
        }
    }
}
