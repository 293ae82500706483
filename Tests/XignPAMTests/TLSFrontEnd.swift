import Foundation
import XignTestSupport

/// A TLS front end on 127.0.0.1 (socat) for the manager, with a certificate for localhost from a test CA. It ends
/// TLS, so it stands for any proxy or interceptor with a certificate the machine trusts: `transcript` is every byte
/// it passed on, in the clear (socat -v).
final class TLSFrontEnd: @unchecked Sendable {
    let directory: TemporaryDirectory
    let port: Int
    let caFile: String
    private let process: ChildProcess
    var url: String { "https://localhost:\(port)" }

    init(to managerPort: Int) throws {
        let directory = TemporaryDirectory()
        let caFile = directory.file("ca.pem")
        func openssl(_ arguments: [String]) throws {
            let result = try ChildProcess("/usr/bin/openssl", arguments, in: directory).wait()
            guard result.status == 0 else { throw TestFailure("openssl \(arguments.first ?? ""): \(result.stderr)") }
        }
        try openssl([
            "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            directory.file("ca.key"),
            "-out", caFile, "-days", "2", "-subj", "/CN=xign test CA",
        ])
        try openssl([
            "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
            directory.file("server.key"),
            "-out", directory.file("server.csr"), "-subj", "/CN=localhost",
        ])
        _ = try directory.write("san.ext", "subjectAltName = DNS:localhost, IP:127.0.0.1\n")
        try openssl([
            "x509", "-req", "-in", directory.file("server.csr"), "-CA", caFile, "-CAkey", directory.file("ca.key"),
            "-CAcreateserial",
            "-out", directory.file("server.pem"), "-days", "2", "-extfile", directory.file("san.ext"),
        ])
        let port = try LoopbackSocket.unusedPort()
        let process = try ChildProcess(
            "/usr/bin/socat",
            [
                "-v",
                "OPENSSL-LISTEN:\(port),bind=127.0.0.1,reuseaddr,fork,verify=0,cert=\(directory.file("server.pem")),key=\(directory.file("server.key"))",
                "TCP:127.0.0.1:\(managerPort)",
            ], in: directory)
        let deadline = Date().addingTimeInterval(10)
        while !LoopbackSocket.isListening(port) {
            guard Date() < deadline, process.poll() == nil else { throw TestFailure("socat did not listen on \(port)") }
            usleep(20_000)
        }
        (self.directory, self.port, self.caFile, self.process) = (directory, port, caFile, process)
    }

    /// What went through, both ways, as socat -v prints it.
    var transcript: String { (try? String(contentsOfFile: process.stderrPath, encoding: .utf8)) ?? "" }

    deinit { process.stop() }
}
