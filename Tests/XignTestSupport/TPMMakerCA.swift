import Foundation

/// A TPM maker's CA for tests: swtpm_localca's root and intermediate, in a directory of its own. A SoftwareTPM
/// manufactured by it holds EK certificates that chain to `certificates`.
public final class TPMMakerCA: @unchecked Sendable {
    public let directory = TemporaryDirectory()

    public init() throws {
        _ = try directory.write(
            "localca.conf",
            """
            statedir = \(directory.path)
            signingkey = \(directory.file("signkey.pem"))
            issuercert = \(directory.file("issuercert.pem"))
            certserial = \(directory.file("certserial"))
            """)
        _ = try directory.write("localca.options", "--platform-manufacturer Xign\n--platform-version 2.1\n--platform-model Test\n")
        _ = try directory.write(
            "setup.conf",
            """
            create_certs_tool = /usr/bin/swtpm_localca
            create_certs_tool_config = \(directory.file("localca.conf"))
            create_certs_tool_options = \(directory.file("localca.options"))
            active_pcr_banks = sha256
            """)
        // swtpm_localca makes its root and intermediate at its first certificate.
        let scratch = TemporaryDirectory()
        try manufacture(into: scratch.path)
        try FileManager.default.createDirectory(atPath: trustedDirectory, withIntermediateDirectories: true)
        for certificate in certificates {
            try FileManager.default.copyItem(atPath: certificate, toPath: trustedDirectory + "/" + (certificate as NSString).lastPathComponent)
        }
    }

    /// The root and the intermediate that issues EK certificates, as PEM files.
    public var certificates: [String] { [directory.file("swtpm-localca-rootca-cert.pem"), directory.file("issuercert.pem")] }

    /// Writes the TPM state into `stateDirectory` with EK certificates (swtpm_setup 0.7 stores RSA 2048 and ECC P-384).
    func manufacture(into stateDirectory: String) throws {
        let result = try ChildProcess(
            "/usr/bin/swtpm_setup",
            ["--tpm2", "--tpmstate", stateDirectory, "--create-ek-cert", "--config", directory.file("setup.conf"), "--overwrite"],
            in: directory
        ).wait(timeout: 60)
        guard result.status == 0 else { throw TestFailure("swtpm_setup failed (\(result.status)): \(result.stderr) \(result.stdout)") }
    }

    /// A directory holding only this CA's certificates, as an administrator installs a maker's CAs: what the manager's
    /// `attestation.ca_directory` names to trust this maker.
    public var trustedDirectory: String { directory.file("trusted") }
}
