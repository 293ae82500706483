import Foundation
import Testing
import XignAttestation
import XignDevice
import XignTestSupport

/// G5: only an EK certificate counts as one. Each forgery is issued by the trusted maker CA itself, so the chain
/// checks; what refuses it is the TCG EK credential profile, a manufacturer pin, or the ROCA fingerprint. The
/// control beside them: swtpm's EK certificate from the same CA.
@Suite struct EndorsementProfileTests {
    static let maker = Result { try TPMMakerCA().lastingTheRun() }

    /// swtpm's RSA EK certificate, as the maker stored it.
    static func swtpmCertificate() throws -> EndorsementCertificate {
        let tpm = try SoftwareTPM(manufacturedBy: try maker.get(), ecc: false)
        let directory = TemporaryDirectory()
        let found = try #require(
            try TPMDeviceKeyStore(directory: directory.path, tcti: tpm.tcti).endorsementCertificates().first)
        return try EndorsementCertificate(der: found.der)
    }

    /// A key pair made with openssl; returns the public key's PEM file.
    static func publicKey(_ algorithm: [String], in scratch: TemporaryDirectory) throws -> String {
        let key = scratch.file("key-\(UUID().uuidString).pem"), publicKey = key + ".pub"
        for arguments in [
            ["genpkey"] + algorithm + ["-out", key], ["pkey", "-in", key, "-pubout", "-out", publicKey],
        ] {
            let result = try ChildProcess("/usr/bin/openssl", arguments, in: scratch).wait(timeout: 60)
            guard result.status == 0 else { throw TestFailure("openssl \(arguments[0]): \(result.stderr)") }
        }
        return publicKey
    }

    static let rsa = ["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
    static let p256 = ["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]

    func refusal(_ der: Data, trusting directory: String? = nil) throws -> String? {
        try CertificateAuthorities(directory: directory ?? Self.maker.get().trustedDirectory).refusal(
            of: try EndorsementCertificate(der: der))
    }

    @Test func aTLSCertificateOrACAFromTheTrustedMakerIsNoEKCertificate() throws {
        let maker = try Self.maker.get()
        let scratch = TemporaryDirectory()
        // The control: swtpm's EK certificate, and one made here with the profile, pass.
        #expect(
            try CertificateAuthorities(directory: maker.trustedDirectory).refusal(of: try Self.swtpmCertificate())
                == nil)
        let rsaKey = try Self.publicKey(Self.rsa, in: scratch), ecKey = try Self.publicKey(Self.p256, in: scratch)
        #expect(
            try refusal(try maker.issue(publicKey: rsaKey, extensions: TPMMakerCA.endorsementProfile(), in: scratch))
                == nil)

        let forgeries: [(String, String, String)] = [
            (
                "the reviewer's: a TLS server certificate", ecKey,
                "[ek]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature\nextendedKeyUsage = serverAuth\nsubjectAltName = DNS:host.example.org\n"
            ),
            (
                "a CA", rsaKey,
                "[ek]\nbasicConstraints = critical,CA:TRUE\nkeyUsage = critical,keyCertSign,keyEncipherment\n"
            ),
            ("no key usage", rsaKey, "[ek]\nbasicConstraints = critical,CA:FALSE\nextendedKeyUsage = 2.23.133.8.1\n"),
            ("a signing key", rsaKey, TPMMakerCA.endorsementProfile(keyUsage: "digitalSignature,keyEncipherment")),
            ("an ECC key for key encipherment", ecKey, TPMMakerCA.endorsementProfile(keyUsage: "keyEncipherment")),
            (
                "TLS beside the EK purpose", rsaKey,
                TPMMakerCA.endorsementProfile().replacingOccurrences(
                    of: "= 2.23.133.8.1", with: "= 2.23.133.8.1,clientAuth")
            ),
            (
                "another purpose", rsaKey,
                TPMMakerCA.endorsementProfile().replacingOccurrences(of: "= 2.23.133.8.1", with: "= codeSigning")
            ),
            (
                "no TPM manufacturer", rsaKey,
                TPMMakerCA.endorsementProfile().replacingOccurrences(of: "dirName:tpm", with: "DNS:tpm.example.org")
            ),
        ]
        for (name, key, extensions) in forgeries {
            let why = try refusal(try maker.issue(publicKey: key, extensions: extensions, in: scratch))
            #expect(why?.contains("is not an EK certificate") == true, "\(name): \(why ?? "accepted")")
        }
    }

    @Test func aCAPinnedToManufacturersVouchesForNoOther() throws {
        let maker = try Self.maker.get()
        let swtpm = try Self.swtpmCertificate()
        #expect(swtpm.manufacturer == "id:00001014")
        let pinned = TemporaryDirectory()
        for certificate in maker.certificates {
            try FileManager.default.copyItem(
                atPath: certificate, toPath: pinned.file((certificate as NSString).lastPathComponent))
        }
        // Both CA files are pinned: whichever the chain ends at, its pin decides.
        func pin(_ text: String) throws {
            for name in ["swtpm-localca-rootca-cert", "issuercert"] {
                _ = try pinned.write("\(name).manufacturers", text)
            }
        }
        try pin("# Infineon only\nid:49465800\n")
        let refused = try CertificateAuthorities(directory: pinned.path).refusal(of: swtpm)
        #expect(
            refused?.contains("names TPM manufacturer id:00001014, which its CA is not pinned to (id:49465800)")
                == true, "\(refused ?? "accepted")")
        try pin("id:49465800\nid:00001014 # IBM's swtpm\n")
        #expect(
            try CertificateAuthorities(directory: pinned.path).refusal(of: swtpm) == nil, "control: pinned to its maker"
        )
        try pin("Infineon\n")
        #expect(throws: AttestationError.self, "a pin that is no manufacturer id is an error, not a silent pass") {
            _ = try CertificateAuthorities(directory: pinned.path)
        }
    }

    /// An RSA key with the ROCA fingerprint: primes of the form k·M + 65537^a mod M, as the flawed library made them,
    /// built here in Python; the certificate otherwise follows the profile.
    @Test func anRSAKeyWithTheROCAFingerprintIsRefused() throws {
        let maker = try Self.maker.get()
        let scratch = TemporaryDirectory()
        let script = """
            import math, random, sys
            from cryptography.hazmat.primitives import serialization
            from cryptography.hazmat.primitives.asymmetric import rsa
            small = [3,5,7,11,13,17,19,23,29,31,37,41,43,47,53,59,61,67,71,73,79,83,89,97,101,103,107,109,113,127,131,137,139,149,151,157,163,167]
            M = 1
            for p in small: M *= p
            def probable_prime(n):
                if n % 2 == 0: return False
                d, s = n - 1, 0
                while d % 2 == 0: d, s = d // 2, s + 1
                for _ in range(40):
                    x = pow(random.randrange(2, n - 1), d, n)
                    if x in (1, n - 1): continue
                    for _ in range(s - 1):
                        x = x * x % n
                        if x == n - 1: break
                    else: return False
                return True
            def roca_prime():
                # Above the square root of 2^2047, so that two of them make a 2048-bit modulus.
                while True:
                    candidate = random.randrange(math.isqrt(2**2047) // M + 1, 2**1024 // M) * M + pow(65537, random.randrange(1, 10**6), M)
                    if candidate < 2**1024 and (candidate - 1) % 65537 and probable_prime(candidate): return candidate
            p, q = roca_prime(), roca_prime()
            n = p * q
            d = pow(65537, -1, (p - 1) * (q - 1))
            key = rsa.RSAPrivateNumbers(p, q, d, d % (p - 1), d % (q - 1), pow(q, -1, p), rsa.RSAPublicNumbers(65537, n)).private_key()
            open(sys.argv[1], "wb").write(key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
            """
        let path = try scratch.write("roca.py", script)
        let made = try ChildProcess("/usr/bin/python3", [path, scratch.file("roca.pub")], in: scratch).wait(
            timeout: 120)
        try #require(made.status == 0, "\(made.stderr)")
        let why = try refusal(
            try maker.issue(
                publicKey: scratch.file("roca.pub"), extensions: TPMMakerCA.endorsementProfile(), in: scratch))
        #expect(why?.contains("ROCA fingerprint") == true, "\(why ?? "accepted")")
        // Control: an RSA key from OpenSSL, in the same profile, passes.
        let honest = try Self.publicKey(Self.rsa, in: scratch)
        #expect(
            try refusal(try maker.issue(publicKey: honest, extensions: TPMMakerCA.endorsementProfile(), in: scratch))
                == nil)
    }
}
