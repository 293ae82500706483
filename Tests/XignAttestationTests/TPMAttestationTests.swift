import Foundation
import Testing
import XignAttestation
import XignCrypto
import XignDevice
import XignTestSupport

/// Attestation against swtpm with EK certificates from a CA made here: the client's TPM side (XignDevice) and the
/// manager's checks (XignAttestation) against each other, and each against tpm2-tools.
@Suite(.serialized) struct TPMAttestationTests {
    static let maker = Result { try TPMMakerCA().lastingTheRun() }
    static let tpm = Result { try SoftwareTPM(manufacturedBy: try maker.get()).lastingTheRun() }

    struct Fixture {
        let tpm: SoftwareTPM
        let store: TPMDeviceKeyStore
        let authorities: CertificateAuthorities
        let keys = TemporaryDirectory()

        init() throws {
            tpm = try TPMAttestationTests.tpm.get()
            store = TPMDeviceKeyStore(directory: keys.path, tcti: tpm.tcti)
            authorities = try CertificateAuthorities(directory: try TPMAttestationTests.maker.get().trustedDirectory)
        }

        func certificate(_ slot: EndorsementKeySlot) throws -> EndorsementCertificate {
            let found = try #require(
                try store.endorsementCertificates().first { $0.slot == slot }, "no \(slot) EK certificate")
            return try EndorsementCertificate(der: found.der)
        }
    }

    @Test(arguments: [EndorsementKeySlot.rsa2048, .p384])
    func aCredentialSealedToTheEKIsReleasedOnlyToItsAttestationKey(slot: EndorsementKeySlot) throws {
        let fixture = try Fixture()
        let certificate = try fixture.certificate(slot)
        #expect(certificate.issuer == "CN=swtpm-localca")
        #expect(fixture.authorities.refusal(of: certificate) == nil)

        let ak = try fixture.store.createAttestationKey()
        let name = try TPMPublicArea(tpm2bPublic: ak.publicArea).name
        let secret = try SecureRandom.bytes(32)
        let challenge = try CredentialChallenge(secret: secret, for: certificate, objectName: name)
        #expect(
            try ak.activateCredential(challenge.credentialBlob, encryptedSecret: challenge.encryptedSecret, slot: slot)
                == secret)

        // The control: the same TPM does not release a credential made for another key's name.
        let other = try fixture.store.createAttestationKey()
        let forOther = try CredentialChallenge(
            secret: secret, for: certificate, objectName: try TPMPublicArea(tpm2bPublic: other.publicArea).name)
        #expect(throws: TPMFailure.self) {
            try ak.activateCredential(forOther.credentialBlob, encryptedSecret: forOther.encryptedSecret, slot: slot)
        }
        #expect(
            try other.activateCredential(forOther.credentialBlob, encryptedSecret: forOther.encryptedSecret, slot: slot)
                == secret)
    }

    @Test func theAttestationKeyCertifiesTheDeviceKeyAndNothingElse() throws {
        let fixture = try Fixture()
        let ak = try fixture.store.createAttestationKey()
        let akArea = try TPMPublicArea(tpm2bPublic: ak.publicArea)
        let (created, _) = try fixture.store.createPendingKey()
        let key = try #require(created as? TPMDeviceKey)
        let nonce = try SecureRandom.bytes(32)
        let (attest, signature) = try ak.certify(key, over: nonce)

        let certification = try KeyCertification(attest: attest, signature: signature, by: akArea)
        let certified = try TPMPublicArea(tpm2bPublic: key.publicArea)
        #expect(certification.extraData == nonce)
        #expect(certification.certifiedName == certified.name)
        #expect(certified.publicKey == (try key.publicKey))
        #expect(certified.attributes.isSuperset(of: .boundToItsTPM))

        // Refusals, each beside the control above: a changed byte, another signer, an AK that is not restricted.
        var changed = attest
        changed[changed.count - 40] ^= 1
        #expect(throws: AttestationError.self) {
            try KeyCertification(attest: changed, signature: signature, by: akArea)
        }
        let otherAK = try TPMPublicArea(tpm2bPublic: try fixture.store.createAttestationKey().publicArea)
        #expect(throws: AttestationError.self) {
            try KeyCertification(attest: attest, signature: signature, by: otherAK)
        }
        let deviceKeyAsSigner = try TPMPublicArea(tpm2bPublic: key.publicArea)
        #expect(throws: AttestationError("the attestation key is not a restricted signing key that stays in its TPM")) {
            try KeyCertification(attest: attest, signature: signature, by: deviceKeyAsSigner)
        }
    }

    @Test func anEKCertificateOfAnotherMakerDoesNotChain() throws {
        let fixture = try Fixture()
        let otherMaker = try TPMMakerCA()
        let otherTPM = try SoftwareTPM(manufacturedBy: otherMaker, ecc: false)
        let otherStore = TPMDeviceKeyStore(directory: fixture.keys.path, tcti: otherTPM.tcti)
        let foreign = try EndorsementCertificate(der: try #require(try otherStore.endorsementCertificates().first).der)
        let refusal = try #require(fixture.authorities.refusal(of: foreign))
        #expect(refusal.contains("does not chain to a trusted maker CA"), "\(refusal)")
        // The control: the other maker's own CA accepts it.
        #expect(try CertificateAuthorities(directory: otherMaker.trustedDirectory).refusal(of: foreign) == nil)
        #expect(otherTPM.tcti != fixture.tpm.tcti)
    }

    @Test func aTPMWithoutEKCertificatesSaysSo() throws {
        let bare = try SoftwareTPM()
        let store = TPMDeviceKeyStore(directory: TemporaryDirectory().path, tcti: bare.tcti)
        #expect(try store.endorsementCertificates().isEmpty)
    }

    /// The wire formats against tpm2-tools, so they are not only checked against themselves: our credential activated
    /// by tpm2_activatecredential for an AK tpm2_createak made, tpm2_makecredential's activated by our AK, and
    /// tpm2_certify's certification checked by the manager's code.
    @Test func credentialsAndCertificationsAgreeWithTpm2Tools() throws {
        let fixture = try Fixture()
        let tpm = fixture.tpm
        func file(_ name: String) -> String { tpm.directory.file(name) }
        func tool(_ name: String, _ arguments: [String]) throws {
            try tpm.tool(name, arguments)
            try tpm.tool("tpm2_flushcontext", ["-t"])  // swtpm holds three objects; the tools leave theirs loaded
        }
        try tool("tpm2_createek", ["-c", file("ek.ctx"), "-G", "rsa", "-u", file("ek.pub")])
        try tool(
            "tpm2_createak",
            [
                "-C", file("ek.ctx"), "-c", file("ak.ctx"), "-G", "ecc", "-g", "sha256", "-s", "ecdsa", "-u",
                file("ak.pub"), "-n", file("ak.name"),
            ])
        let toolsAK = try TPMPublicArea(tpm2bPublic: try Data(contentsOf: URL(fileURLWithPath: file("ak.pub"))))
        #expect(
            toolsAK.name == (try Data(contentsOf: URL(fileURLWithPath: file("ak.name")))),
            "the name is computed as the TPM computes it")

        // Ours → tpm2_activatecredential (its file: magic, version 1, TPM2B_ID_OBJECT, TPM2B_ENCRYPTED_SECRET).
        let secret = try SecureRandom.bytes(32)
        let ours = try CredentialChallenge(
            secret: secret, for: try fixture.certificate(.rsa2048), objectName: toolsAK.name)
        try (Data([0xBA, 0xDC, 0xC0, 0xDE, 0, 0, 0, 1]) + ours.credentialBlob + ours.encryptedSecret).write(
            to: URL(fileURLWithPath: file("cred.in")))
        try tool("tpm2_startauthsession", ["--policy-session", "-S", file("session.ctx")])
        try tpm.tool("tpm2_policysecret", ["-S", file("session.ctx"), "-c", "e"])
        try tpm.tool(
            "tpm2_activatecredential",
            [
                "-c", file("ak.ctx"), "-C", file("ek.ctx"), "-i", file("cred.in"), "-o", file("released"), "-P",
                "session:\(file("session.ctx"))",
            ])
        try tool("tpm2_flushcontext", [file("session.ctx")])
        #expect(try Data(contentsOf: URL(fileURLWithPath: file("released"))) == secret)

        // tpm2_makecredential → our activation.
        let ak = try fixture.store.createAttestationKey()
        try secret.write(to: URL(fileURLWithPath: file("secret")))
        let name = try TPMPublicArea(tpm2bPublic: ak.publicArea).name.map { String(format: "%02x", $0) }.joined()
        try tpm.tool(
            "tpm2_makecredential",
            ["-T", "none", "-u", file("ek.pub"), "-s", file("secret"), "-n", name, "-o", file("cred.out")])
        let made = [UInt8](try Data(contentsOf: URL(fileURLWithPath: file("cred.out"))).dropFirst(8))
        let blobEnd = 2 + (Int(made[0]) << 8 | Int(made[1]))
        let credentialBlob = Data(made[..<blobEnd]), encryptedSecret = Data(made[blobEnd...])
        #expect(try ak.activateCredential(credentialBlob, encryptedSecret: encryptedSecret, slot: .rsa2048) == secret)

        // tpm2_certify → the manager's check.
        try tool("tpm2_createprimary", ["-C", "o", "-c", file("primary.ctx")])
        try tool(
            "tpm2_create", ["-C", file("primary.ctx"), "-G", "ecc", "-u", file("key.pub"), "-r", file("key.priv")])
        try tool(
            "tpm2_load",
            ["-C", file("primary.ctx"), "-u", file("key.pub"), "-r", file("key.priv"), "-c", file("key.ctx")])
        try tool(
            "tpm2_certify",
            [
                "-C", file("ak.ctx"), "-c", file("key.ctx"), "-g", "sha256", "-o", file("attest"), "-s",
                file("signature"), "-f", "plain",
            ])
        let signature = try #require(
            ECDSASignature.raw(fromDER: try Data(contentsOf: URL(fileURLWithPath: file("signature")))))
        let certification = try KeyCertification(
            attest: try Data(contentsOf: URL(fileURLWithPath: file("attest"))), signature: signature, by: toolsAK)
        #expect(
            certification.certifiedName
                == (try TPMPublicArea(tpm2bPublic: try Data(contentsOf: URL(fileURLWithPath: file("key.pub"))))).name)
    }

    /// A P-256 EK (template L-2), which swtpm_setup does not make: its certificate made here and stored where a maker
    /// stores it, readable by the owner only (swtpm_setup's let the index authorize reads), then read, sealed to and
    /// activated as for the others.
    @Test func aP256EndorsementKeyAttestsToo() throws {
        let maker = try TPMAttestationTests.maker.get()
        let tpm = try SoftwareTPM(manufacturedBy: maker, ecc: false)
        func file(_ name: String) -> String { tpm.directory.file(name) }
        try tpm.tool("tpm2_createek", ["-c", file("ek.ctx"), "-G", "ecc", "-u", file("ek.pub")])
        try tpm.tool("tpm2_readpublic", ["-c", file("ek.ctx"), "-f", "pem", "-o", file("ek.pem")])
        try tpm.tool("tpm2_flushcontext", ["-t"])
        let der = try maker.issue(
            publicKey: file("ek.pem"), extensions: TPMMakerCA.endorsementProfile(keyUsage: "keyAgreement"),
            in: tpm.directory)
        try der.write(to: URL(fileURLWithPath: file("ek.der")))
        try tpm.tool(
            "tpm2_nvdefine", ["0x01c0000a", "-C", "o", "-s", "\(der.count)", "-a", "ownerread|ownerwrite|no_da"])
        try tpm.tool("tpm2_nvwrite", ["0x01c0000a", "-C", "o", "-i", file("ek.der")])

        let store = TPMDeviceKeyStore(directory: tpm.directory.path, tcti: tpm.tcti)
        let found = try #require(try store.endorsementCertificates().first)
        #expect(found.slot == .p256, "ECC before RSA")
        let certificate = try EndorsementCertificate(der: found.der)
        #expect(certificate.keyKind == .p256)
        #expect(try CertificateAuthorities(directory: maker.trustedDirectory).refusal(of: certificate) == nil)
        let ak = try store.createAttestationKey()
        let secret = try SecureRandom.bytes(32)
        let challenge = try CredentialChallenge(
            secret: secret, for: certificate, objectName: try TPMPublicArea(tpm2bPublic: ak.publicArea).name)
        #expect(
            try ak.activateCredential(challenge.credentialBlob, encryptedSecret: challenge.encryptedSecret, slot: .p256)
                == secret)
    }
}
