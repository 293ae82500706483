import Hummingbird
import XignProtocol

/// Login confirmations: hosts start and wait; enrolled devices list and deny (they approve by authenticating).
struct ConfirmationController<Context: RequestContext> {
    let manager: IdentityManager

    func addRoutes(to router: Router<Context>) {
        router.post(RouterPath(APIPath.hostChallenges)) { request, _ in
            try Response.json(
                .created,
                try await manager.hostChallenge(for: try await request.decodeBody(as: HostChallengeRequest.self)))
        }
        router.post(RouterPath(APIPath.confirmations)) { request, _ in
            Response.jose(
                try await manager.startConfirmation(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.hostDirectory)) { request, _ in
            Response.jose(
                try await manager.hostDirectory(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.confirmationWait)) { request, _ in
            Response.jose(
                try await manager.waitForConfirmation(try await request.decodeBody(as: ConfirmationWaitRequest.self)))
        }
        router.post(RouterPath(APIPath.confirmationWithdrawal)) { request, _ in
            try Response.json(
                .ok,
                try await manager.withdrawConfirmation(
                    try await request.decodeBody(as: ConfirmationWithdrawalRequest.self)))
        }
        router.post(RouterPath(APIPath.confirmationsPending)) { request, _ in
            Response.jose(
                try await manager.pendingConfirmations(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
        router.post(RouterPath(APIPath.confirmationDenial)) { request, _ in
            try Response.json(
                .ok,
                try await manager.denyConfirmation(
                    body: try await request.collectBody(), signature: request.signatureHeader))
        }
    }
}
