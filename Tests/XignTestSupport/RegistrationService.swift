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

    /// The bearer token where manager.conf's `secret_file` can name it (0600).
    public func tokenFile() throws -> String { try directory.write("token", token) }
}
