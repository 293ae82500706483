import Hummingbird
import XignProtocol

/// Hosts joining the manager, and the covers of the sessions their users approved.
struct HostController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.hosts)) { request, _ in
            Response.jose(
                try await manager.joinHost(body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.sessionCovers)) { request, _ in
            Response.jose(
                try await manager.openSessionCover(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.sessionCoverUse)) { request, _ in
            Response.jose(
                try await manager.useSessionCover(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.sessionCoverEnd)) { request, _ in
            try await manager.endSessionCover(body: try await request.collectBody(), signature: request.signatureHeader)
            return Response(status: .noContent)
        }
    }
}
