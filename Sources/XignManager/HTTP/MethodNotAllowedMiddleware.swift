import HTTPTypes
import Hummingbird
import XignProtocol
import XignWeb

/// A path of the API asked with a method it does not take answers 405 with Allow (RFC 9110, 15.5.6), where the
/// router alone would answer 404 as if the path did not exist.
struct MethodNotAllowedMiddleware<Context: RequestContext>: RouterMiddleware {
    /// Each route's method. The API tests check it against the routes and docs/openapi.yaml.
    static var methods: [String: HTTPRequest.Method] {
        var methods: [String: HTTPRequest.Method] = [
            APIPath.health: .get, APIPath.registrationParameters: .get, APIPath.identityProviders: .get,
            APIPath.providerRegistrationCallback: .get,
        ]
        for page in [
            WebPath.personalize, WebPath.approve, WebPath.approveInQRCode, WebPath.account, WebPath.script,
            WebPath.stylesheet, WebPath.console, WebPath.consoleAccounts, WebPath.consoleAudit, WebPath.consoleAuditCSV,
            WebPath.consoleHosts, WebPath.consoleHealth, WebPath.consoleWaiting, WebPath.register, WebPath.notMe,
        ] {
            methods[page] = .get
        }
        for path in [
            APIPath.registrations, APIPath.personalizationDecrypt, APIPath.personalizations, APIPath.challenges,
            APIPath.deviceRevocations,
            APIPath.authentications, APIPath.authenticationFinish, APIPath.token, APIPath.hosts, APIPath.hostChallenges,
            APIPath.hostDirectory, APIPath.sessionCovers, APIPath.sessionCoverUse, APIPath.sessionCoverEnd,
            APIPath.confirmations, APIPath.confirmationWait, APIPath.confirmationWithdrawal,
            APIPath.confirmationsPending, APIPath.confirmationDenial,
            APIPath.apiAccess, APIPath.accountDevices, APIPath.passkeyPersonalizations, APIPath.confirmationView,
            APIPath.confirmationApproval,
            APIPath.webSessions, APIPath.webSessionEnd, APIPath.webPending, APIPath.webDevices, APIPath.attestations,
            APIPath.endorsementChecks, APIPath.consoleSessions, APIPath.consoleSessionEnd, APIPath.consoleActions,
            APIPath.providerRegistrations, APIPath.providerRegistrationWait, APIPath.customRegistrationSteps,
            APIPath.providerRegistrationConfirmation, APIPath.registrationCancellations,
        ] {
            methods[path] = .post
        }
        return methods
    }

    private let methods = Self.methods

    func handle(
        _ request: Request, context: Context, next: (Request, Context) async throws -> Response
    ) async throws -> Response {
        if let allowed = methods[request.uri.path], request.method != allowed {
            var error = ManagerError(
                .methodNotAllowed, .badRequest, "\(request.uri.path) takes \(allowed.rawValue) only")
            error.allow = allowed
            throw error
        }
        return try await next(request, context)
    }
}
