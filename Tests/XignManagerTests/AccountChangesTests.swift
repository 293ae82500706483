import Foundation
import Testing
import XignProtocol
import XignTestSupport

@testable import XignManager

/// What an api access grant may change: exactly its process's field, and a new PIN sealed to this grant that meets
/// the policy.
@Suite struct AccountChangesTests {
    static func request(
        grant: String = "grant-1", _ fields: (inout ApiAccessRequest) throws -> Void
    ) rethrows -> ApiAccessRequest {
        var request = ApiAccessRequest(grant: grant, nonce: "n")
        try fields(&request)
        return request
    }

    @Test func eachGrantTakesExactlyTheFieldOfItsProcess() async throws {
        try await ManagerBlocks.with { blocks in
            let changes = blocks.manager.accountChanges
            let revoke = Self.request { $0.revokedDeviceId = "other-device" }
            let revokeControl = try changes.checkFields(revoke, for: .revokeDevice)
            let biometricControl = try changes.checkFields(Self.request { $0.factor = .biometric }, for: .addFactor)
            #expect(revokeControl == nil && biometricControl == nil, "no PIN in either")
            let refused: [(ApiAccessRequest, ApiAccessProcess, String)] = [
                (revoke, .changePin, "exactly the field"),
                (Self.request { _ in }, .revokeDevice, "exactly the field"),
                (
                    Self.request {
                        $0.revokedDeviceId = "d"
                        $0.factor = .biometric
                    }, .revokeDevice, "exactly the field"
                ),
                (
                    Self.request {
                        $0.factor = .biometric
                        $0.revokedDeviceId = "d"
                    }, .addFactor, "exactly the field"
                ),
                (Self.request { $0.biometricEnrolment = "digest" }, .delete, "exactly the field"),
                (Self.request { $0.factor = .pin }, .addFactor, "only the biometric factor"),
            ]
            for (request, process, reason) in refused {
                let error = #expect(throws: ManagerError.self) { try changes.checkFields(request, for: process) }
                #expect(error?.status == .badRequest && error?.description.contains(reason) == true, "\(process)")
            }
        }
    }

    /// The new PIN opens only for the grant it was sealed to, and must meet the PIN policy.
    @Test func aNewPINIsSealedToItsGrantAndMeetsThePolicy() async throws {
        try await ManagerBlocks.with { blocks in
            let changes = blocks.manager.accountChanges
            let key = blocks.manager.secrets.pinSealingKey.publicKey
            let sealed = { (pin: String, grant: String) in
                try SealedPINMessage(sealing: pin, to: key, for: .grant(grant))
            }
            let change = try Self.request { $0.sealedNewPin = try sealed("97531", "grant-1") }
            #expect(try changes.checkFields(change, for: .changePin) == "97531")

            let otherGrant = Self.request(grant: "grant-2") { $0.sealedNewPin = change.sealedNewPin }
            let moved = #expect(throws: ManagerError.self) { try changes.checkFields(otherGrant, for: .changePin) }
            #expect(moved?.description.contains("does not open") == true)

            let weak = try Self.request { $0.sealedNewPin = try sealed("1111", "grant-1") }
            let policy = #expect(throws: ManagerError.self) { try changes.checkFields(weak, for: .changePin) }
            #expect(policy?.status == .unprocessableContent && policy?.detail.code == .pinPolicy)
            #expect(policy?.detail.pinError != nil)
        }
    }
}
