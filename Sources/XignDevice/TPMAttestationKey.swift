import CXignTPM
import FoundationEssentials

/// The EK certificates a TPM's maker may have stored, by the key they are for (TCG EK Credential Profile).
public enum EndorsementKeySlot: CaseIterable, Sendable, CustomStringConvertible {
    case p256, p384, rsa2048

    var kind: xign_tpm_ek_kind {
        switch self {
        case .rsa2048: XIGN_TPM_EK_RSA2048
        case .p256: XIGN_TPM_EK_P256
        case .p384: XIGN_TPM_EK_P384
        }
    }

    public var description: String {
        switch self {
        case .rsa2048: "RSA 2048"
        case .p256: "ECC P-256"
        case .p384: "ECC P-384"
        }
    }
}

extension TPMDeviceKeyStore {
    /// The DER EK certificates the TPM holds, the quickest EK to make first (ECC before RSA).
    public func endorsementCertificates() throws -> [(slot: EndorsementKeySlot, der: Data)] {
        try Self.withTPM(tcti) { tpm in
            try EndorsementKeySlot.allCases.compactMap { slot in
                var bytes = [UInt8](repeating: 0, count: 4096)
                var size = 0
                let rc = xign_tpm_read_ek_certificate(tpm, slot.kind, &bytes, bytes.count, &size)
                if rc == XIGN_TPM_RC_NO_EK_CERTIFICATE { return nil }
                guard rc == 0 else { throw TPMFailure.from(rc) }
                return (slot, Data(bytes.prefix(size)))
            }
        }
    }

    /// A new attestation key, for one attestation; it lives in memory only.
    public func createAttestationKey() throws -> TPMAttestationKey {
        var blob = xign_tpm_blob()
        try Self.withTPM(tcti) { tpm in
            let rc = xign_tpm_create_ak(tpm, &blob)
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        return TPMAttestationKey(tcti: tcti, blob: blob)
    }
}

/// A restricted signing key in the TPM that proves, once, that a device or host key lives in the same TPM as the EK.
public struct TPMAttestationKey: Sendable {
    let tcti: String
    let blob: xign_tpm_blob

    /// The key's TPM2B_PUBLIC, by whose hash (its name) the manager seals its credential.
    public var publicArea: Data { TPMDeviceKey.publicArea(of: blob) }

    /// TPM2_ActivateCredential: the secret the manager sealed to the EK of `slot` for this key.
    public func activateCredential(
        _ credentialBlob: Data, encryptedSecret: Data, slot: EndorsementKeySlot
    ) throws -> Data {
        var out = [UInt8](repeating: 0, count: 64)
        var size = 0
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            var ak = blob
            let rc = [UInt8](credentialBlob).withUnsafeBufferPointer { credential in
                [UInt8](encryptedSecret).withUnsafeBufferPointer { secret in
                    xign_tpm_activate_credential(
                        tpm, slot.kind, &ak, credential.baseAddress, credential.count, secret.baseAddress, secret.count,
                        &out, &size)
                }
            }
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        return Data(out.prefix(size))
    }

    /// TPM2_Certify of `key` by this key over `qualifyingData`: the TPMS_ATTEST and its signature, r || s.
    public func certify(_ key: TPMDeviceKey, over qualifyingData: Data) throws -> (attest: Data, signature: Data) {
        var attest = [UInt8](repeating: 0, count: 1024)
        var size = 0
        var signature = [UInt8](repeating: 0, count: 64)
        try TPMDeviceKeyStore.withTPM(tcti) { tpm in
            var ak = blob
            var certified = key.blob
            let rc = [UInt8](qualifyingData).withUnsafeBufferPointer {
                xign_tpm_certify(
                    tpm, &ak, &certified, $0.baseAddress, $0.count, &attest, attest.count, &size, &signature)
            }
            guard rc == 0 else { throw TPMFailure.from(rc) }
        }
        return (Data(attest.prefix(size)), Data(signature))
    }
}

extension TPMDeviceKey {
    /// The key's TPM2B_PUBLIC, which a certification names.
    public var publicArea: Data { Self.publicArea(of: blob) }

    static func publicArea(of blob: xign_tpm_blob) -> Data {
        var copy = blob
        return withUnsafeBytes(of: &copy.public_area) { Data($0.prefix(blob.public_size)) }
    }
}
