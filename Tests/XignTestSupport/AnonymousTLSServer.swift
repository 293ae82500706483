import Foundation

/// OpenSSL's own TLS server on 127.0.0.1 with no certificate at all: it offers only anonymous ciphers (aNULL, TLS
/// 1.2; TLS 1.3 has none), as a stand-in that wants a client to skip the server's proof (duo_unix #391).
public final class AnonymousTLSServer: @unchecked Sendable {
    public let port: Int
    private let directory = TemporaryDirectory()
    private let process: ChildProcess

    public init() throws {
        port = try LoopbackSocket.unusedPort()
        process = try ChildProcess(
            "/usr/bin/openssl",
            [
                "s_server", "-accept", "127.0.0.1:\(port)", "-nocert", "-tls1_2", "-cipher", "aNULL:@SECLEVEL=0",
                "-www",
            ], in: directory)
        guard waitUntil(seconds: 10, { LoopbackSocket.isListening(self.port) || self.process.poll() != nil }),
            process.poll() == nil
        else {
            throw TestFailure("openssl s_server did not start: \(log)")
        }
    }

    public var url: String { "https://127.0.0.1:\(port)" }

    /// What the server printed: each refused handshake says why.
    public var log: String {
        ((try? String(contentsOfFile: process.stdoutPath, encoding: .utf8)) ?? "")
            + ((try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "")
    }

    deinit { process.stop() }
}
