import Foundation
import Testing
import XignCrypto
import XignProtocol
import XignTestSupport

@testable import XignManager

/// New accounts and activations: written with their audit and mail in one transaction, or not at all.
@Suite struct ActivationsTests {
    @Test func anAccountComesWithItsActivationItsAuditAndItsMail() async throws {
        try await ManagerBlocks.with { blocks in
            let account = try await blocks.account()
            let activation = try await blocks.activation(account.activationId)
            #expect(
                activation.state == .pending && activation.email == "alice@example.org"
                    && activation.alias == "Activation 1")
            #expect(try await blocks.audit().map(\.event) == [.accountCreated])
            let mail = try blocks.deliveredMail()
            #expect(mail.count == 1 && mail[0].contains("To: alice@example.org"))
            let fingerprint = blocks.manager.signer.publicKey.shortFingerprint
            #expect(
                mail[0].contains(account.activationId) && mail[0].contains(fingerprint), "the payload the QR code holds"
            )
        }
    }

    /// A second account for the same address is refused as a registration attribute, and leaves nothing behind.
    @Test func aTakenAddressIsRefusedAndNothingIsWritten() async throws {
        try await ManagerBlocks.with { blocks in
            _ = try await blocks.account()
            #expect(try await blocks.manager.activations.isEmailTaken("alice@example.org"))
            #expect(try await !blocks.manager.activations.isEmailTaken("bob@example.org"))
            let taken = await #expect(throws: ManagerError.self) { try await blocks.account() }
            #expect(taken?.detail.code == .registrationRejected && taken?.detail.attributes == ["email": .notAvailable])
            #expect(try await blocks.manager.administration.activations(email: "alice@example.org").count == 1)
            #expect(try await blocks.audit().count == 1 && blocks.deliveredMail().count == 1)
            #expect(try await blocks.account("bob@example.org").email == "bob@example.org")
        }
    }

    /// The secret is 128 random bits in base32, the PIN kept only as a salted verifier, and no two activations alike.
    @Test func anActivationsSecretsAreFreshAndThePINIsNotKept() async throws {
        try await ManagerBlocks.with { blocks in
            let first = try blocks.manager.activations.makeActivation(pin: "24680")
            let second = try blocks.manager.activations.makeActivation(pin: "24680")
            #expect(first.secret.count == 26 && Base32.decode(first.secret)?.count == 16)
            #expect(first.id != second.id && first.secret != second.secret)
            #expect(first.pin.salt != second.pin.salt && first.pin.value != second.pin.value, "salted")
            #expect(first.pin.iterations == blocks.manager.configuration.pinHashIterations)
        }
    }
}
