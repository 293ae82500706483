import Foundation
import Testing
import XignAttestation
import XignCrypto
import XignDevice
import XignTestSupport

/// Attestation against swtpm with EK certificates from a CA made here: the client's TPM side (XignDevice) and the
/// manager's checks (XignAttestation) against each other, and each against tpm2-tools.
@Suite(.serialized) struct TPMAttestationTests {
    static let maker = Result { try TPMMakerCA() }
    static let tpm = Result { try SoftwareTPM(manufacturedBy: try maker.get()) }

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
            let found = try #require(try store.endorsementCertificates().first { $0.slot == slot }, "no \(slot) EK certificate")
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
        #expect(try ak.activateCredential(challenge.credentialBlob, encryptedSecret: challenge.encryptedSecret, slot: slot) == secret)

        // The control: the same TPM does not release a credential made for another key's name.
        let other = try fixture.store.createAttestationKey()
        let forOther = try CredentialChallenge(secret: secret, for: certificate, objectName: try TPMPublicArea(tpm2bPublic: other.publicArea).name)
        #expect(throws: TPMFailure.self) { try ak.activateCredential(forOther.credentialBlob, encryptedSecret: forOther.encryptedSecret, slot: slot) }
        #expect(try other.activateCredential(forOther.credentialBlob, encryptedSecret: forOther.encryptedSecret, slot: slot) == secret)
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
        #expect(throws: AttestationError.self) { try KeyCertification(attest: changed, signature: signature, by: akArea) }
        let otherAK = try TPMPublicArea(tpm2bPublic: try fixture.store.createAttestationKey().publicArea)
        #expect(throws: AttestationError.self) { try KeyCertification(attest: attest, signature: signature, by: otherAK) }
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
}
