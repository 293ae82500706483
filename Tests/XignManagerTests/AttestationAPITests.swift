import Foundation
import Testing
import XignCrypto
import XignDevice
import XignProtocol
import XignTestSupport

@testable import XignCore

/// What a modified client can send under `require_hardware_key = attested`, at the API: another key's certification,
/// a certification replayed into another session, a software key that says `tpm`, a changed certification. Each is
/// refused with securityInsufficient and what is missing; the control beside them, an honest attestation, passes.
@Suite(.machineShare) struct AttestationAPITests {
    static let maker = Result { try TPMMakerCA().lastingTheRun() }

    /// The manager's config for these tests: attested keys required, the maker CA trusted.
    static func config() throws -> String {
        ManagerFiles.testConfig
            + "\n[policy]\nrequire_hardware_key = attested\n[attestation]\nca_directory = \(try maker.get().trustedDirectory)\n"
    }

    struct Setting<Manager: ManagerFiles> {
        let api: API<Manager>
        let tpm: SoftwareTPM
        let keys: TPMDeviceKeyStore

        init(_ api: API<Manager>) throws {
            self.api = api
            tpm = try SoftwareTPM(manufacturedBy: try AttestationAPITests.maker.get(), ecc: false)
            keys = TPMDeviceKeyStore(directory: api.manager.directory.file("keys"), tcti: tpm.tcti)
            try FileManager.default.createDirectory(atPath: keys.directory, withIntermediateDirectories: true)
        }

        /// A fresh personalization session for a new registration.
        func session(_ email: String) async throws -> [String: Any] {
            let result = try await api.decrypt(try await api.register(email), pin: "24680").signedPayload(
                key: try api.managerKey, type: SignedAnswerType.decrypt)
            return try #require(result["session"] as? [String: Any])
        }

        func tpmKey() throws -> TPMDeviceKey { try #require(try keys.createPendingKey().key as? TPMDeviceKey) }

        /// The evidence the client would send for `key` in `session`, from the manager's real credential.
        func evidence(for key: TPMDeviceKey, session: [String: Any]) throws -> AttestationEvidence {
            let attestor = KeyAttestor(tpm: keys, client: ManagerClient(url: api.url, http: HTTPClient()))
            return try #require(
                try attestor.evidence(for: key, purpose: .personalization(sessionId: session["id"] as? String ?? "")))
        }

        /// POST /v1/personalizations of `key`, signed by it, claiming `kind`, with `evidence`.
        func personalize(
            _ key: any DeviceKey, kind: KeyKind = .tpm, session: [String: Any], evidence: AttestationEvidence?
        ) async throws -> APIAnswer {
            let request = PersonalizeRequest(
                sessionId: session["id"] as? String ?? "", mode: .new,
                deviceKey: Base64URL.encode(try key.publicKey.derRepresentation),
                keyKind: kind,
                device: DeviceInformationMessage(name: "test-host", platform: "Linux test"), nonce: "pn",
                newActivation: nil, attestation: evidence)
            let body = try JSONEncoder.canonical.encode(request)
            let message = SignedRequest.canonicalMessage(
                method: "POST", path: APIPath.personalizations, body: body,
                challenge: session["challenge"] as? String ?? "")
            return try await api.call(
                "POST", APIPath.personalizations, body: body,
                headers: [(SignedRequest.signatureHeader, Base64URL.encode(try key.signature(for: message)))])
        }
    }

    func expectRefused(_ answer: APIAnswer, saying reason: String, sourceLocation: SourceLocation = #_sourceLocation) {
        let message = answer.error["message"] as? String ?? ""
        #expect(
            answer.status == 403 && answer.errorCode == "securityInsufficient", "\(answer.json)",
            sourceLocation: sourceLocation)
        #expect(message.contains(reason), "\(message)", sourceLocation: sourceLocation)
    }

    @Test(arguments: TestDatabase.allCases)
    func anHonestAttestationPassesAndEachForgeryIsRefused(database: TestDatabase) async throws {
        let setting = try Setting(API(manager: try ManagerProcess(config: try Self.config(), database: database)))

        // The control: the key the TPM certified, in the session it was attested for.
        let session = try await setting.session("honest@example.org")
        let key = try setting.tpmKey()
        let evidence = try setting.evidence(for: key, session: session)
        await #expect(try setting.personalize(key, session: session, evidence: evidence).status == 200)

        // The same certification again, in another session: its credential was spent.
        let replay = try await setting.session("replay@example.org")
        await expectRefused(
            try setting.personalize(key, session: replay, evidence: evidence),
            saying: "its attestation is unknown, expired or was used already")

        // One key certified, another registered.
        let other = try await setting.session("other@example.org")
        let certified = try setting.tpmKey(), registered = try setting.tpmKey()
        await expectRefused(
            try setting.personalize(
                registered, session: other, evidence: try setting.evidence(for: certified, session: other)),
            saying: "the certified key is not the key being registered")

        // A software key that says it is in a TPM, with no attestation or with one of a TPM key.
        let software = try await setting.session("software@example.org")
        let softwareKey = try SoftwareDeviceKeyStore(directory: setting.keys.directory).createPendingKey().key
        await expectRefused(
            try setting.personalize(softwareKey, session: software, evidence: nil),
            saying: "this one is not attested: the client sent no attestation"
        )
        await expectRefused(
            try setting.personalize(
                softwareKey, session: software,
                evidence: try setting.evidence(for: try setting.tpmKey(), session: software)),
            saying: "the certified key is not the key being registered")

        // A certification with one byte changed.
        let changed = try await setting.session("changed@example.org")
        let changedKey = try setting.tpmKey()
        var forged = try setting.evidence(for: changedKey, session: changed)
        var attest = try #require(Base64URL.decode(forged.attestation?.attest ?? ""))
        attest[attest.count - 1] ^= 1
        forged.attestation?.attest = Base64URL.encode(attest)
        await expectRefused(
            try setting.personalize(changedKey, session: changed, evidence: forged), saying: "the certification failed")

        // The control once more, after the refusals: a fresh honest attestation in that session still passes.
        await #expect(
            try setting.personalize(
                changedKey, session: changed, evidence: try setting.evidence(for: changedKey, session: changed)
            ).status == 200)
    }

    @Test func theDoctorsCheckNamesTheIssuerAndWhetherItChains() async throws {
        try await InProcessManager.run(config: try Self.config()) { inProcess in
            let setting = try Setting(inProcess.api)
            let der = try #require(try setting.keys.endorsementCertificates().first).der
            let trusted = try await setting.api.post(
                APIPath.endorsementChecks, EndorsementCheckRequest(endorsementCertificate: Base64URL.encode(der)))
            #expect(
                trusted.status == 200 && trusted.json["accepted"] as? Bool == true
                    && trusted.json["issuer"] as? String == "CN=swtpm-localca")
            let foreignTPM = try SoftwareTPM(manufacturedBy: try TPMMakerCA(), ecc: false)
            let foreign = try #require(
                try TPMDeviceKeyStore(directory: setting.keys.directory, tcti: foreignTPM.tcti)
                    .endorsementCertificates()
                    .first
            )
            .der
            let refused = try await setting.api.post(
                APIPath.endorsementChecks, EndorsementCheckRequest(endorsementCertificate: Base64URL.encode(foreign)))
            #expect(refused.status == 200 && refused.json["accepted"] as? Bool == false)
            #expect((refused.json["refusal"] as? String ?? "").contains("does not chain to a trusted maker CA"))
            // A start with that certificate is refused before the client's TPM does any work; the control is the trusted one.
            let ak = Base64URL.encode(try setting.keys.createAttestationKey().publicArea)
            let session = try await setting.session("foreign@example.org")["id"] as? String
            let start = { (certificate: Data) in
                try await setting.api.post(
                    APIPath.attestations,
                    AttestationStartRequest(
                        sessionId: session, joinSecret: nil, endorsementCertificate: Base64URL.encode(certificate),
                        attestationKey: ak))
            }
            let foreignStart = try await start(foreign)
            #expect(
                foreignStart.status == 403 && foreignStart.errorCode == "securityInsufficient", "\(foreignStart.json)")
            #expect(try await start(der).status == 201)
            let garbage = try await setting.api.post(
                APIPath.endorsementChecks,
                EndorsementCheckRequest(endorsementCertificate: Base64URL.encode(Data("not a certificate".utf8))))
            #expect(
                garbage.status == 400
                    && (garbage.error["message"] as? String ?? "").contains("not a DER X.509 certificate")
            )
        }
    }

    /// G5, the reviewer's forgery: a TLS server certificate from the trusted maker CA, whose key the forger holds in a
    /// file. Its start is refused with securityInsufficient naming the profile check, before any credential exists;
    /// the control is swtpm's EK certificate from the same CA.
    @Test func aTLSCertificateFromATrustedCACarriesNoAttestation() async throws {
        try await InProcessManager.run(config: try Self.config()) { inProcess in
            let setting = try Setting(inProcess.api)
            let maker = try AttestationAPITests.maker.get()
            let scratch = TemporaryDirectory()
            let key = scratch.file("tls.pem")
            for arguments in [
                ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key],
                ["pkey", "-in", key, "-pubout", "-out", key + ".pub"],
            ] {
                #expect(try ChildProcess("/usr/bin/openssl", arguments, in: scratch).wait().status == 0)
            }
            let forged = try maker.issue(
                publicKey: key + ".pub",
                extensions:
                    "[ek]\nbasicConstraints = CA:FALSE\nkeyUsage = digitalSignature\nextendedKeyUsage = serverAuth\nsubjectAltName = DNS:host.example.org\n",
                in: scratch)
            let ak = Base64URL.encode(try setting.keys.createAttestationKey().publicArea)
            let session = try await setting.session("forger@example.org")["id"] as? String
            func start(_ certificate: Data) async throws -> APIAnswer {
                try await setting.api.post(
                    APIPath.attestations,
                    AttestationStartRequest(
                        sessionId: session, joinSecret: nil, endorsementCertificate: Base64URL.encode(certificate),
                        attestationKey: ak))
            }
            await expectRefused(try start(forged), saying: "is not an EK certificate: its key usage lacks keyAgreement")
            let check = try await setting.api.post(
                APIPath.endorsementChecks, EndorsementCheckRequest(endorsementCertificate: Base64URL.encode(forged)))
            #expect(
                check.json["accepted"] as? Bool == false
                    && (check.json["refusal"] as? String ?? "").contains("is not an EK certificate"))
            let honest = try #require(try setting.keys.endorsementCertificates().first).der
            await #expect(try start(honest).status == 201, "control: the TPM's own EK certificate from the same CA")
        }
    }

    /// Starts for one session at once: each is answered, the last one stored voids the others, and the session can
    /// still be attested after them.
    @Test(arguments: TestDatabase.allCases)
    func manyStartsAtOnceForOneSessionLeaveOneCredential(database: TestDatabase) async throws {
        let setting = try Setting(API(manager: try ManagerProcess(config: try Self.config(), database: database)))
        let session = try await setting.session("parallel@example.org")
        let certificate = try #require(try setting.keys.endorsementCertificates().first).der
        let ak = try setting.keys.createAttestationKey().publicArea
        let request = AttestationStartRequest(
            sessionId: session["id"] as? String, joinSecret: nil, endorsementCertificate: Base64URL.encode(certificate),
            attestationKey: Base64URL.encode(ak))
        let api = setting.api
        let answers = try await inParallel(8) { _ in try await api.post(APIPath.attestations, request) }
        #expect(answers.map(\.status) == Array(repeating: 201, count: 8), "\(answers.map(\.json))")
        let ids = Set(answers.compactMap { $0.json["attestationId"] as? String })
        #expect(ids.count == 8)
        #expect(
            try setting.api.manager.query("SELECT count(*) FROM attestation_challenges") == ["1"],
            "one credential per session")

        let key = try setting.tpmKey()
        await #expect(
            try setting.personalize(key, session: session, evidence: try setting.evidence(for: key, session: session))
                .status == 200)
    }
}
