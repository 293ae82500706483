import Foundation
import XignCore
import XignHarness
import XignProtocol

extension Bench {
    /// The CA whose TPMs the bench manager trusts; nil without swtpm_setup.
    static func attestationCA() throws -> TPMMakerCA? {
        FileManager.default.isExecutableFile(atPath: "/usr/bin/swtpm_setup") ? try TPMMakerCA() : nil
    }

    /// Whole TPM personalizations with and without attestation, in one run: a TPM without an EK certificate (nothing
    /// to attest) beside one whose maker the manager trusts (EK certificate, credential, certification; one more
    /// round trip).
    static func attestationFigures(
        ca: TPMMakerCA, work: String, pin: String, floor: Figure,
        register: (String) throws -> PersonalizationInitializationData
    ) throws {
        func personalizations(_ name: String, tpm: SoftwareTPM, prefix: String) throws -> Figure {
            var configuration = ClientConfiguration()
            configuration.stateDirectory = work + "/\(prefix)-state"
            configuration.deviceKey = .tpm
            configuration.tcti = tpm.tcti
            let sdk = try XignSdk(configuration: configuration, localUser: prefix)
            let activations = try (0..<15).map { try register("\(prefix)\($0)@example.org") }
            return try measure(name, runs: activations.count) { run in
                guard
                    case .newPersonalization(let parameters) = try sdk.personalizer()
                        .decryptPersonalizationInitializationDataSynchronous(
                            data: activations[run], pin: pin)
                else { throw XignSdkError(.invalidManagerResponse, "expected newPersonalization") }
                _ = try sdk.personalizer().personalizeIdentityManagerSynchronous(parameters: parameters)
            }
        }
        let plain = try personalizations("whole personalization, TPM key", tpm: try SoftwareTPM(), prefix: "plain")
        let tpm = try SoftwareTPM(manufacturedBy: ca)
        let attested = try personalizations("the same, attested (ECC P-384 EK)", tpm: tpm, prefix: "attested")
        table(
            "Personalization with TPM key attestation (swtpm; a real TPM is slower)", [plain, attested], floor: floor)
        print(
            String(
                format: "attested / plain: %.2f× (+%.1f ms median)", attested.median / plain.median,
                attested.median - plain.median))
    }
}
