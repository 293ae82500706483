import Hummingbird
import XignProtocol

/// Authentication after a /v1/challenges challenge: start (device-signed), finish, token. The start and the finishes
/// wait for the database within one budget (RequestBudget).
struct AuthenticationController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.authentications)) { request, _ in
            let body = try await request.collectBody()
            return Response.jose(
                try await RequestBudget.within {
                    try await manager.startAuthentication(body: body, signature: request.signatureHeader)
                })
        }
        router.post(RouterPath(APIPath.authenticationFinish)) { request, _ in
            let body = try await request.collectBody()
            return Response.jose(
                try await RequestBudget.within {
                    try await manager.finishAuthentication(body: body, signature: request.signatureHeader)
                })
        }
        router.post(RouterPath(APIPath.apiAccess)) { request, _ in
            let body = try await request.collectBody()
            return Response.jose(
                try await RequestBudget.within {
                    try await manager.finishApiAccess(body: body, signature: request.signatureHeader)
                })
        }
        router.post(RouterPath(APIPath.token)) { request, _ in
            Response.jose(try await manager.token(try await request.decodeBody(as: TokenRequest.self)))
        }
    }
}
