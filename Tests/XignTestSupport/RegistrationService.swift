import Foundation

/// The organization's registration service behind a custom API identity provider (`IdentityProvider/
/// registration_service.py`): one-step and two-step registrations, refusals, and an answer that is neither. It is
/// the organization's own code, which the test plays; the manager's side of it is real.
public final class RegistrationService: @unchecked Sendable {
    public let port: Int
    public let token = "registration-service-token"
    public var url: String { "http://127.0.0.1:\(port)/xign/registration" }
    private let directory = TemporaryDirectory()
    private let process: ChildProcess

    public init() throws {
        port = try ManagerProcess.freePort()
        process = try ChildProcess(
            "/usr/bin/python3",
            [Browser.repository + "/Tests/XignTestSupport/IdentityProvider/registration_service.py", "\(port)"],
            stdin: token + "\n", in: directory)
        RunEnd.stop(process.pid)
        guard waitUntil(seconds: 15, { LoopbackSocket.isListening(self.port) }) else {
            throw TestFailure("the registration service did not listen on \(port)")
        }
    }

    deinit { process.stop() }

    /// manager.conf's section for a custom provider `id` that reaches this service in `steps`, with `extra` lines;
    /// without `token`, the manager does not name itself to the service.
    public func providerSection(_ id: String, steps: Int, token: Bool = true, extra: String = "") throws -> String {
        """
        [identity_provider.\(id)]
        type = custom
        url = \(url)
        steps = \(steps)
        \(token ? "secret_file = \(try directory.write("token", self.token))" : "")
        \(extra)
        """
    }
}
