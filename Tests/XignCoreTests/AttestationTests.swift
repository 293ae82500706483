import Foundation
import Testing
import XignCrypto
import XignDevice
import XignProtocol
import XignTestSupport

@testable import XignCore

/// Personalization and host join with TPM key attestation, through the real manager and swtpm instances whose EK
/// certificates a CA made here issued. Each refusal stands beside the attested control.
@Suite struct AttestationTests {
    static let maker = Result { try TPMMakerCA().lastingTheRun() }

    /// A manager that trusts `maker`'s CA, with `policy` appended to its configuration.
    func fixture(policy: String, tpm: SoftwareTPM) throws -> Fixture {
        let trusted = try Self.maker.get().trustedDirectory
        let fixture = try Fixture(managerConfig: policy + "\n[attestation]\nca_directory = \(trusted)\n")
        fixture.tpm = tpm
        return fixture
    }

    static let attestedOnly = ManagerProcess.testConfig + "\n[policy]\nrequire_hardware_key = attested\n"

    @Test func aTPMWhoseMakerTheManagerTrustsIsAttestedAndLogsIn() throws {
        let fixture = try fixture(policy: Self.attestedOnly, tpm: try SoftwareTPM(manufacturedBy: try Self.maker.get()))
        let result = try fixture.personalize(try fixture.register("attested@example.org"))
        #expect(result.keyAttestation == "attested by CN=swtpm-localca")
        let activation = try #require(try fixture.activations().first)
        #expect(activation["ekIssuer"] as? String == "CN=swtpm-localca", "\(activation)")
        #expect(try TPMTests().login(try fixture.sdk(), result.idmIdentifier).subject == "attested@example.org")
    }

    @Test(arguments: [
        ("another maker's TPM", "does not chain to a trusted maker CA"),
        ("a TPM without EK certificates", "this TPM holds no endorsement-key certificate from its maker"),
    ])
    func aTPMTheManagerCannotTrustIsRefusedWhereAttestationIsRequired(tpm: String, reason: String) throws {
        let softwareTPM =
            tpm == "a TPM without EK certificates"
            ? try SoftwareTPM() : try SoftwareTPM(manufacturedBy: try TPMMakerCA(), ecc: false)
        let fixture = try fixture(policy: Self.attestedOnly, tpm: softwareTPM)
        let before = fixture.snapshot()
        #expect {
            try fixture.personalize(try fixture.register("refused@example.org"))
        } throws: { error in
            guard let error = error as? XignSdkError, error.errorCode == .securityInsufficient else { return false }
            return error.message.contains("accepts only attested TPM device keys") && error.message.contains(reason)
        }
        #expect(fixture.snapshot() == before, "a refused personalization leaves no key and no enrolment")
        #expect(try fixture.activations().first?["deviceId"] == nil)
    }

    @Test func aServiceThatRequiresAttestationRefusesAKeyThatIsOnlyClaimed() throws {
        // The manager takes any key; its pam service takes attested ones only.
        let policy = ManagerProcess.testConfig(
            pamService: "roles = login", "role.login.authenticators = device+pin", "require_hardware_key = attested")
        let fixture = try fixture(policy: policy, tpm: try SoftwareTPM())
        let claimed = try fixture.personalize(try fixture.register("claimed@example.org"))
        #expect(claimed.keyAttestation?.hasPrefix("not attested: this TPM holds no") == true, "\(claimed)")
        let refusal = #expect(throws: XignSdkError.self) {
            try TPMTests().login(try fixture.sdk(), claimed.idmIdentifier)
        }
        #expect(refusal?.errorCode == .securityInsufficient)
        do {
            _ = try TPMTests().login(try fixture.sdk(), claimed.idmIdentifier)
        } catch let error as XignSdkError {
            #expect(
                error.message.contains("not attested: this TPM holds no endorsement-key certificate"),
                "\(error.message)")
        }
        // The control: a machine whose TPM attests logs in to the same service.
        fixture.tpm = try SoftwareTPM(manufacturedBy: try Self.maker.get())
        let attested = try fixture.personalize(try fixture.register("proven@example.org"), user: "bob")
        #expect(
            try TPMTests().login(try fixture.sdk(user: "bob"), attested.idmIdentifier).subject == "proven@example.org")
    }

    @Test func aHostJoinsAttestedAndAnotherMakersHostIsRefused() throws {
        let fixture = try fixture(policy: Self.attestedOnly, tpm: try SoftwareTPM(manufacturedBy: try Self.maker.get()))
        func join(_ name: String, stateDirectory: String) throws -> HostEnrolment {
            let added = try fixture.manager.admin(["hosts", "add", name])
            let sdk = try fixture.sdk(user: "root", stateDirectory: fixture.directory.file(stateDirectory))
            return try sdk.joinHost(
                managerURL: fixture.manager.url,
                token: try HostJoinToken(parsing: String(added.stdout.split(separator: " ").last ?? "")))
        }
        #expect(try join("web1", stateDirectory: "host-web1").keyAttestation == "attested by CN=swtpm-localca")
        let listed = try fixture.manager.admin(["hosts", "list"])
        #expect(
            listed.stdout.contains("web1") && listed.stdout.contains("attested (EK issuer CN=swtpm-localca)"),
            "\(listed.stdout)")

        fixture.tpm = try SoftwareTPM(manufacturedBy: try TPMMakerCA(), ecc: false)
        #expect {
            try join("web2", stateDirectory: "host-web2")
        } throws: { error in
            (error as? XignSdkError)?.errorCode == .securityInsufficient
                && "\(error)".contains("does not chain to a trusted maker CA")
        }
        #expect(!(try fixture.manager.admin(["hosts", "list"]).stdout.contains("web2\t")))
    }

    @Test func doctorNamesTheEKIssuerAndWhetherTheManagerTrustsIt() throws {
        let fixture = try fixture(
            policy: ManagerProcess.testConfig, tpm: try SoftwareTPM(manufacturedBy: try Self.maker.get()))
        _ = try fixture.personalize(try fixture.register("doctor@example.org"))
        let trusted = try fixture.sdk().diagnose(pamDirectory: fixture.directory.path)
        let detail = { (diagnosis: Diagnosis, name: String) in diagnosis.items.first { $0.name == name } }
        #expect(detail(trusted, "ek certificate")?.detail == "ECC P-384, issued by CN=swtpm-localca")
        #expect(detail(trusted, "attestation \(fixture.manager.url)")?.status == .ok)

        // Another maker's TPM on the same machine: the manager does not trust its EK, and doctor says what to do.
        fixture.tpm = try SoftwareTPM(manufacturedBy: try TPMMakerCA(), ecc: false)
        let foreign = try fixture.sdk().diagnose(pamDirectory: fixture.directory.path)
        #expect(detail(foreign, "ek certificate")?.detail == "RSA 2048, issued by CN=swtpm-localca")
        let attestation = try #require(detail(foreign, "attestation \(fixture.manager.url)"))
        #expect(
            attestation.status == .warning && attestation.detail.contains("does not chain to a trusted maker CA"),
            "\(attestation.detail)")
        #expect(attestation.hint?.contains("attestation.ca_directory") == true)
    }
}
