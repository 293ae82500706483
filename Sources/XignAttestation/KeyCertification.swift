import FoundationEssentials
import XignCrypto

/// A TPM2_Certify result: the attestation key says that an object with `certifiedName` is loaded in its TPM, over
/// `extraData` from the verifier. Parsed from the TPMS_ATTEST the TPM marshalled and signed.
public struct KeyCertification: Sendable, Equatable {
    public let extraData: Data
    public let certifiedName: Data

    static let generatedValue: UInt32 = 0xFF54_4347  // TPM_GENERATED_VALUE: the TPM made this structure
    static let attestCertify: UInt16 = 0x8017  // TPM_ST_ATTEST_CERTIFY

    /// Checks that `signature` (ECDSA P-256 r || s) over `attest` is the attestation key's, then parses it as a
    /// certification. The key must be restricted, so it signs only structures the TPM made itself.
    public init(attest: Data, signature: Data, by attestationKey: TPMPublicArea) throws {
        guard attest.count <= 1024 else { throw AttestationError("the certification is too large") }
        guard attestationKey.attributes.isSuperset(of: Self.attestationKeyAttributes) else {
            throw AttestationError("the attestation key is not a restricted signing key that stays in its TPM")
        }
        guard attestationKey.publicKey.isValidSignature(signature, for: attest) else {
            throw AttestationError("the certification's signature is not the attestation key's")
        }
        (extraData, certifiedName) = try Self.parse(attest)
    }

    /// TPMS_ATTEST of TPM_ST_ATTEST_CERTIFY: its extraData and the certified name.
    static func parse(_ attest: Data) throws -> (extraData: Data, certifiedName: Data) {
        var reader = TPMReader(attest, what: "the certification")
        guard try reader.uint32() == Self.generatedValue, try reader.uint16() == Self.attestCertify else {
            throw AttestationError("the attestation is not a TPM2_Certify the TPM made")
        }
        _ = try reader.sized()  // qualifiedSigner
        let extraData = try reader.sized()
        _ = try reader.bytes(17 + 8)  // clockInfo, firmwareVersion
        let certifiedName = try reader.sized()
        _ = try reader.sized()  // qualifiedName
        try reader.expectEnd()
        return (extraData, certifiedName)
    }

    public static let attestationKeyAttributes: TPMPublicArea.Attributes = TPMPublicArea.Attributes.boundToItsTPM.union(
        [.restricted, .sign])
}
