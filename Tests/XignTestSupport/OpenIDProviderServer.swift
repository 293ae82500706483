import Foundation

/// Debian's glewlwyd as the organization's OpenID provider on 127.0.0.1, set up by `IdentityProvider/glewlwyd.py`:
/// discovery, a JWKS with an RS256 or ES256 key, the client `xign`, and three people (nina, omar, pat) with a login
/// name and groups in their claims. The person's browser at the provider is an HTTP client that signs in with the
/// password and follows the provider's redirect (`signIn`); the provider and its tokens are real.
public final class OpenIDProviderServer: @unchecked Sendable {
    public let port: Int
    public let clientSecret = "xign-client-secret"
    public var issuer: String { "http://localhost:\(port)/api/oidc" }
    private let directory = TemporaryDirectory()
    private let process: ChildProcess

    static let script = Browser.repository + "/Tests/XignTestSupport/IdentityProvider/glewlwyd.py"

    /// `callback`: the manager's redirect URI; `algorithm`: RS256 or ES256; `clockOffset` runs the provider under
    /// faketime (such as "-2h"), so that it issues tokens by a clock that is off.
    public init(callback: String, algorithm: String = "ES256", clockOffset: String? = nil) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/glewlwyd") else {
            throw TestFailure("glewlwyd is not installed; run `make test` (it installs Debian's glewlwyd)")
        }
        port = try ManagerProcess.freePort()
        let state = directory.file("glewlwyd")
        let prepared = try Self.run(["prepare", state, "\(port)"], in: directory)
        let command = ["/usr/bin/glewlwyd", "--config-file=\(prepared["config"] as? String ?? "")"]
        let launched = clockOffset.map { FakeClock.command($0) + command } ?? command
        process = try ChildProcess(launched[0], Array(launched.dropFirst()), in: directory)
        RunEnd.stop(process.pid)
        guard waitUntil(seconds: 15, { LoopbackSocket.isListening(self.port) }) else {
            throw TestFailure(
                "glewlwyd did not listen on \(port): \(try? String(contentsOfFile: state + "/glewlwyd.log", encoding: .utf8))"
            )
        }
        _ = try Self.run(["configure", "\(port)", callback, algorithm, state], input: clientSecret, in: directory)
    }

    deinit { process.stop() }

    /// manager.conf for a manager at `publicURL` that registers through this provider as `corp`: the login name from
    /// the `login` claim, and host groups from the `groups` claim.
    public func managerConfig(publicURL: String, base: String) throws -> String {
        """
        \(base)
        [server]
        public_url = \(publicURL)
        [identity_providers]
        names = corp
        [identity_provider.corp]
        name = Corp SSO
        issuer = \(issuer)
        client_id = xign
        client_secret_file = \(try directory.write("client-secret", clientSecret))
        scopes = openid
        login_name_claim = login
        groups_claim = groups
        host_groups = web-admins:web+db, staff:intranet
        """
    }

    /// The person signs in at the provider and grants the client; where the provider then sends the browser back.
    public func signIn(_ user: String, password: String, at authorizationURL: String) throws -> String {
        let answer = try Self.run(["sign-in", "\(port)", user, authorizationURL], input: password, in: directory)
        guard answer["status"] as? Int == 302, let location = answer["location"] as? String else {
            throw TestFailure("the provider did not send the browser back: \(answer)")
        }
        return location
    }

    /// The same, for an async test: on a thread of its own, not one of Swift's concurrency threads, which other tests
    /// share and a blocking wait would hold.
    public func signIn(_ user: String, password: String, at authorizationURL: String) async throws -> String {
        try await onOwnThread { try self.signIn(user, password: password, at: authorizationURL) }
    }

    /// Stops the provider, as when it is down.
    public func stop() { process.stop() }

    private static func run(
        _ arguments: [String], input: String? = nil, in directory: TemporaryDirectory
    ) throws -> [String: Any] {
        let python = Browser.repository + "/.build-browser/venv/bin/python"
        let result = try ChildProcess(
            FileManager.default.isExecutableFile(atPath: python) ? python : "/usr/bin/python3", [script] + arguments,
            stdin: input.map { $0 + "\n" }, in: directory
        ).wait(timeout: 60)
        guard result.status == 0,
            let line = result.stdout.split(separator: "\n").last,
            let fields = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
            fields["error"] == nil
        else {
            throw TestFailure(
                "glewlwyd.py \(arguments.first ?? ""): \(result.stdout.suffix(500)) \(result.stderr.suffix(1500))")
        }
        return fields
    }
}
