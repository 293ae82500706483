import Hummingbird
import XignProtocol
import XignWeb

/// Registration through an identity provider: the list of providers, the start, the browser's return from the
/// provider (a page), and the client's wait for the outcome.
struct ProviderRegistrationController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager
    let web: WebApp<Context>

    func addRoutes(to router: Router<Context>) {
        router.get(RouterPath(APIPath.identityProviders)) { _, _ in
            try Response.json(.ok, manager.identityProviderList())
        }
        router.post(RouterPath(APIPath.providerRegistrations)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            return try Response.json(
                .created,
                try await manager.startProviderRegistration(
                    try await request.decodeBody(as: ProviderRegistrationRequest.self), from: client))
        }
        router.get(RouterPath(APIPath.providerRegistrationCallback)) { request, _ in
            var query: [String: String] = [:]
            for name in ["state", "code", "error", "error_description"] {
                query[name] = request.uri.queryParameters[name[...]].map(String.init)
            }
            let page = await manager.finishProviderRegistration(query)
            if let link = page.activationLink {
                // On to the activation page; the data stays in the fragment, which the browser sends to no server.
                return Response(status: .seeOther, headers: [.location: link, .cacheControl: "no-store"])
            }
            return try web.notice(
                title: page.registered ? "Registered" : "Not registered", message: page.message,
                status: page.registered ? .ok : .badRequest)
        }
        router.post(RouterPath(APIPath.customRegistrationSteps)) { request, _ in
            try Response.json(
                .ok,
                try await manager.customRegistrationStep(
                    try await request.decodeBody(as: CustomRegistrationStepRequest.self)))
        }
        router.post(RouterPath(APIPath.providerRegistrationWait)) { request, _ in
            Response.jose(
                try await manager.waitForProviderRegistration(
                    try await request.decodeBody(as: ProviderRegistrationWaitRequest.self)))
        }
    }
}
