import Foundation

/// Certificates for TLS tests, made with the openssl command line: a CA, and server certificates it signed for
/// 127.0.0.1 (valid, for another host name, expired), plus a second CA that signed nothing the manager uses.
public struct TestCertificates: Sendable {
    public let caFile: String
    public let otherCAFile: String
    /// Each a (certificate, key) pair of PEM files; keys are 0600.
    public let valid: (certificate: String, key: String)
    public let wrongHost: (certificate: String, key: String)
    public let expired: (certificate: String, key: String)
    /// Valid for 127.0.0.1 but signed by the other CA, as a renewal that changes CA would be.
    public let fromOtherCA: (certificate: String, key: String)

    public init(in directory: TemporaryDirectory) throws {
        func openssl(_ arguments: [String], faketime: String? = nil) throws {
            let command = (faketime.map { FakeClock.command($0) } ?? []) + ["/usr/bin/openssl"] + arguments
            let result = try ChildProcess(command[0], Array(command.dropFirst()), in: directory).wait()
            guard result.status == 0 else { throw TestFailure("openssl \(arguments.first ?? ""): \(result.stderr)") }
        }
        func authority(_ name: String) throws -> String {
            try openssl([
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                "-subj", "/CN=xign test \(name)",
                "-keyout", directory.file("\(name).key"), "-out", directory.file("\(name).pem"),
            ])
            return directory.file("\(name).pem")
        }
        func server(
            _ name: String, signedBy ca: String, altName: String, faketime: String? = nil
        ) throws -> (String, String) {
            let (key, request, certificate) = (
                directory.file("\(name).key"), directory.file("\(name).csr"), directory.file("\(name).pem")
            )
            try openssl([
                "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=\(name)",
                "-keyout", key, "-out", request,
            ])
            let extensions = try directory.write("\(name).ext", "subjectAltName = \(altName)\n")
            try openssl(
                [
                    "x509", "-req", "-in", request, "-CA", directory.file("\(ca).pem"), "-CAkey",
                    directory.file("\(ca).key"), "-CAcreateserial",
                    "-days", "2", "-extfile", extensions, "-out", certificate,
                ], faketime: faketime)
            chmod(key, 0o600)
            return (certificate, key)
        }
        caFile = try authority("ca")
        otherCAFile = try authority("other-ca")
        valid = try server("valid", signedBy: "ca", altName: "IP:127.0.0.1")
        wrongHost = try server("wrong-host", signedBy: "ca", altName: "DNS:manager.example.org")
        expired = try server("expired", signedBy: "ca", altName: "IP:127.0.0.1", faketime: "@2020-01-01 00:00:00")
        fromOtherCA = try server("renewed", signedBy: "other-ca", altName: "IP:127.0.0.1")
    }
}
