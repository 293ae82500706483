import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdTLS
import Logging
import NIOCore
import ServiceLifecycle
import XignProtocol
import XignWeb

/// The manager as an application: the routes of each process, the error middleware, the connection limits, TLS
/// when configured, and the services beside the server (mail, expiry, certificate reload).
/// `xign-manager serve` only parses its arguments and runs what this builds.
public func buildApplication(
    manager: IdentityManager, onListening: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) throws -> some ApplicationProtocol {
    let router = Router(context: ManagerRequestContext.self)
    router.add(middleware: MetricsMiddleware())
    router.add(
        middleware: BrowserBoundaryMiddleware(
            origin: { manager.relyingParty.origin },
            strictTransport: manager.configuration.effectivePublicURL.description.hasPrefix("https:")))
    router.add(middleware: ErrorLoggingMiddleware(logger: manager.logger))
    router.add(middleware: MethodNotAllowedMiddleware())
    let limits = manager.configuration.limits
    router.add(
        middleware: ForwardedClientLimitMiddleware(
            limit: limits.connectionsPerAddress, trustedProxies: limits.trustedProxies))
    router.get(RouterPath(APIPath.health)) { _, _ in try Response.json(.ok, manager.health()) }
    RegistrationController(manager: manager).addRoutes(to: router)
    PersonalizationController(manager: manager).addRoutes(to: router)
    DeviceController(manager: manager).addRoutes(to: router)
    AuthenticationController(manager: manager).addRoutes(to: router)
    HostController(manager: manager).addRoutes(to: router)
    ConfirmationController(manager: manager).addRoutes(to: router)
    PasskeyController(manager: manager).addRoutes(to: router)
    AttestationController(manager: manager).addRoutes(to: router)
    let web = try WebApp<ManagerRequestContext>(site: {
        let party = manager.relyingParty
        return WebSite(origin: party.origin, relyingPartyId: party.id, apiPaths: APIPath.calledByTheWebApp)
    })
    web.addRoutes(to: router)
    ConsoleController(manager: manager, web: web).addRoutes(to: router)
    ProviderRegistrationController(manager: manager, web: web).addRoutes(to: router)

    let configuration = manager.configuration
    let connections = ConnectionsPerAddress()
    let http1 = HTTP1Channel.Configuration(additionalChannelHandlers: [
        ConnectionLimitHandler(
            connections, perAddress: limits.connectionsPerAddress, perProxy: limits.connectionsPerProxy,
            trustedProxies: limits.trustedProxies),
        RequestDeadlineHandler(
            readTimeout: .milliseconds(limits.readTimeoutMilliseconds),
            idleTimeout: .milliseconds(limits.idleTimeoutMilliseconds)),
    ])
    var services: [any Service] = [
        MailRelayService(manager: manager), ExpiryService(manager: manager), WakeUpService(manager: manager),
    ]
    if let metrics = configuration.metricsListen {
        services.append(MetricsServer.make(manager: manager, host: metrics.host, port: metrics.port, http1: http1))
    }
    let server: HTTPServerBuilder
    if let tls = configuration.tls {
        let certificates = try TLSCertificates(tls)
        server = try .tls(.http1(configuration: http1), tlsConfiguration: certificates.serverConfiguration)
        services.append(TLSReloadService(certificates: certificates, logger: manager.logger))
    } else {
        server = .http1(configuration: http1)
        if !ManagerURL.isLoopback(host: configuration.listenHost) {
            manager.logger.warning(
                "serving plain HTTP on \(configuration.listenHost): clients refuse http:// except on loopback; set server.tls_certificate and server.tls_key"
            )
        }
    }
    let host = configuration.listenHost
    return Application(
        router: router,
        server: server,
        configuration: .init(address: .hostname(host, port: configuration.listenPort), serverName: nil),
        services: services,
        onServerRunning: { channel in
            let port = channel.localAddress?.port ?? 0
            do { try await manager.didBind(host: host, port: port) } catch {
                manager.logger.error("cannot record the bound URL: \(error)")
            }
            await onListening(port)
        },
        logger: manager.logger
    )
}
