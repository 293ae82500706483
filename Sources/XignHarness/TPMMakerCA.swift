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
        _ = try directory.write(
            "localca.options", "--platform-manufacturer Xign\n--platform-version 2.1\n--platform-model Test\n")
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
            try FileManager.default.copyItem(
                atPath: certificate, toPath: trustedDirectory + "/" + (certificate as NSString).lastPathComponent)
        }
    }

    /// For a static: this CA serves the whole run, and its directory goes when it ends.
    public func lastingTheRun() -> TPMMakerCA {
        RunEnd.remove(directory.path)
        return self
    }

    /// The root and the intermediate that issues EK certificates, as PEM files.
    public var certificates: [String] {
        [directory.file("swtpm-localca-rootca-cert.pem"), directory.file("issuercert.pem")]
    }

    /// Writes the TPM state into `stateDirectory` with EK certificates (swtpm_setup 0.7 stores RSA 2048 and ECC P-384).
    func manufacture(into stateDirectory: String) throws {
        let result = try ChildProcess(
            "/usr/bin/swtpm_setup",
            [
                "--tpm2", "--tpmstate", stateDirectory, "--create-ek-cert", "--config", directory.file("setup.conf"),
                "--overwrite",
            ],
            in: directory
        ).wait(timeout: 60)
        guard result.status == 0 else {
            throw TestFailure("swtpm_setup failed (\(result.status)): \(result.stderr) \(result.stdout)")
        }
    }

    /// The TCG EK credential profile's extensions, as an openssl extension section named `ek`: not a CA, the key usage
    /// of `keyUsage`'s EK, the EK purpose, and a TPM manufacturer (swtpm's IBM by default). "0." keeps openssl from
    /// reading the OIDs' first arc as a prefix.
    public static func endorsementProfile(
        keyUsage: String = "keyEncipherment", manufacturer: String = "id:00001014"
    ) -> String {
        """
        [ek]
        basicConstraints = critical,CA:FALSE
        keyUsage = critical,\(keyUsage)
        extendedKeyUsage = 2.23.133.8.1
        subjectAltName = critical,dirName:tpm
        [tpm]
        0.2.23.133.2.1 = \(manufacturer)
        0.2.23.133.2.2 = test
        0.2.23.133.2.3 = id:00010002
        """
    }

    /// A DER certificate for the public key in the PEM file `publicKey`, issued by this maker's intermediate with the
    /// openssl extension section `ek` of `extensions`: an EK certificate, or a forgery the test describes.
    public func issue(publicKey: String, extensions: String, in scratch: TemporaryDirectory) throws -> Data {
        let config = try scratch.write("ext-\(UUID().uuidString).cnf", extensions)
        let output = scratch.file("issued-\(UUID().uuidString).der")
        let result = try ChildProcess(
            "/usr/bin/openssl",
            [
                "x509", "-new", "-subj", "/CN=issued", "-force_pubkey", publicKey, "-CA",
                directory.file("issuercert.pem"), "-CAkey",
                directory.file("signkey.pem"), "-days", "3650", "-extfile", config, "-extensions", "ek", "-outform",
                "der", "-out", output,
            ], in: scratch
        ).wait(timeout: 30)
        guard result.status == 0 else { throw TestFailure("openssl x509: \(result.stderr)") }
        return try Data(contentsOf: URL(fileURLWithPath: output))
    }

    /// A directory holding only this CA's certificates, as an administrator installs a maker's CAs: what the manager's
    /// `attestation.ca_directory` names to trust this maker.
    public var trustedDirectory: String { directory.file("trusted") }
}
