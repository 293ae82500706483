import Hummingbird
import XignProtocol

/// Requests an enrolled device signs over a challenge it fetched first.
struct DeviceController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.challenges)) { request, _ in
            let challenge = try await request.decodeBody(as: ChallengeRequest.self)
            // A login's first request: within a login's budget, as the start and the finish are.
            return try Response.json(
                .created, try await RequestBudget.within { try await manager.challenge(for: challenge) })
        }
        router.post(RouterPath(APIPath.deviceRevocations)) { request, _ in
            Response.jose(
                try await manager.revoke(body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.accountDevices)) { request, _ in
            Response.jose(
                try await manager.accountDevices(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
    }
}
