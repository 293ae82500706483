import Foundation
import Hummingbird
import Logging
import NIOCore
import XignProtocol

/// The manager as an application: the routes of each process, the error middleware and the mail relay.
/// `xign-manager serve` only parses its arguments and runs what this builds.
public func buildApplication(
    manager: IdentityManager, onListening: @escaping @Sendable (_ port: Int) async -> Void = { _ in }
) -> some ApplicationProtocol {
    let router = Router()
    router.add(middleware: ErrorLoggingMiddleware(logger: manager.logger))
    router.get(RouterPath(APIPath.health)) { _, _ in try Response.json(.ok, manager.health()) }
    RegistrationController(manager: manager).addRoutes(to: router)
    PersonalizationController(manager: manager).addRoutes(to: router)
    DeviceController(manager: manager).addRoutes(to: router)
    AuthenticationController(manager: manager).addRoutes(to: router)
    HostController(manager: manager).addRoutes(to: router)
    ConfirmationController(manager: manager).addRoutes(to: router)
    let host = manager.configuration.listenHost
    return Application(
        router: router,
        configuration: .init(address: .hostname(host, port: manager.configuration.listenPort), serverName: nil),
        services: [MailRelayService(manager: manager)],
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
