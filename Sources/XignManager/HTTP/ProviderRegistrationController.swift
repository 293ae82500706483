import Hummingbird
import XignProtocol
import XignWeb

/// Registration through an identity provider: the list of providers, the start, the browser's return from the
/// provider (a page), the code the person who signed in types there, the client's wait for the outcome, and the
/// "not me" link of the notice mail.
struct ProviderRegistrationController<Context: RemoteAddressRequestContext> {
    let manager: IdentityManager
    let web: WebApp<Context>

    /// The registration cookie lives as long as a registration may wait.
    static var cookieSeconds: Int64 { IdentityManager.providerRegistrationMilliseconds / 1000 }

    func addRoutes(to router: Router<Context>) {
        router.get(RouterPath(APIPath.identityProviders)) { _, _ in
            try Response.json(.ok, manager.identityProviderList())
        }
        router.post(RouterPath(APIPath.providerRegistrations)) { request, context in
            let client = request.clientAddress(context, trustedProxies: manager.configuration.limits.trustedProxies)
            let started = try await manager.startProviderRegistration(
                try await request.decodeBody(as: ProviderRegistrationRequest.self), from: client)
            var response = try Response.json(.created, started.message)
            if let secret = started.browserSecret {
                // The web app's browser: the provider's answer must come back in it.
                response.headers[.setCookie] = Request.setCookie(
                    Request.registrationCookieName, secret, maxAge: Self.cookieSeconds, lax: true)
            }
            return response
        }
        router.get(RouterPath(APIPath.providerRegistrationCallback)) { request, _ in
            var query: [String: String] = [:]
            for name in ["state", "code", "error", "error_description"] {
                query[name] = request.uri.queryParameters[name[...]].map(String.init)
            }
            let ended = Request.setCookie(Request.registrationCookieName, "", maxAge: 0, lax: true)
            switch await manager.finishProviderRegistration(query, browserSecret: try? request.registrationCookie) {
            case .confirm(let view, let secret):
                return try web.registrationConfirmation(
                    provider: view.provider, email: view.email, alias: view.alias, startedAt: view.startedAt,
                    startedFrom: view.startedFrom,
                    cookie: Request.setCookie(
                        Request.registrationCookieName, secret, maxAge: Self.cookieSeconds, lax: true))
            case .activation(let link):
                // On to the activation page; the data stays in the fragment, which the browser sends to no server.
                return Response(
                    status: .seeOther, headers: [.location: link, .cacheControl: "no-store", .setCookie: ended])
            case .refused(let message):
                var response = try web.notice(title: "Not registered", message: message, status: .badRequest)
                response.headers[.setCookie] = ended
                return response
            }
        }
        router.post(RouterPath(APIPath.providerRegistrationConfirmation)) { request, _ in
            let answer = try await manager.confirmProviderRegistration(
                try await request.decodeBody(as: ProviderRegistrationConfirmationRequest.self),
                browserSecret: try request.registrationCookie)
            var response = try Response.json(.ok, answer)
            response.headers[.setCookie] = Request.setCookie(Request.registrationCookieName, "", maxAge: 0, lax: true)
            return response
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
        router.post(RouterPath(APIPath.registrationCancellations)) { request, _ in
            try Response.json(
                .ok,
                try await manager.cancelRegistration(
                    try await request.decodeBody(as: RegistrationCancellationRequest.self)))
        }
    }
}
