import Hummingbird
import XignProtocol

/// Hosts joining the manager.
struct HostController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.hosts)) { request, _ in
            Response.jose(
                try await manager.joinHost(body: try await request.collectBody(), signature: request.signatureHeader))
        }
    }
}
