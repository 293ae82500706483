import FoundationEssentials
import XignDevice
import XignProtocol

/// fprintd's reader, re-exported so the configuration can name it without importing XignDevice.
public typealias FingerprintReader = XignDevice.FingerprintReader

extension FingerprintReader {
    /// The digest of `user`'s enrolled fingers a factor is bound to; nil where binding is switched off.
    func boundEnrolment(user: String) throws -> String? {
        do { return try enrolmentDigest(user: user) } catch let error as ReaderError {
            throw XignSdkError(.biometricUnavailable, "the enrolled fingers cannot be read: \(error.description)")
        }
    }

    /// A match, or the error that says what to do.
    func check(user: String, prompt: (String) -> Void) throws {
        let matched: Bool
        do { matched = try verify(user: user, prompt: prompt) } catch let error as ReaderError {
            switch error.kind {
            case .noEnrolledFingers:
                throw XignSdkError(
                    .biometricUnavailable, "\(user) has no finger enrolled with fprintd; run fprintd-enroll \(user)")
            case .timedOut:
                throw XignSdkError(.biometricMismatch, "no finger was read in time; try again")
            case .unavailable, .failed:
                throw XignSdkError(.biometricUnavailable, "the fingerprint reader cannot be used: \(error.description)")
            }
        }
        guard matched else {
            throw XignSdkError(.biometricMismatch, "the finger does not match \(user)'s enrolled fingers; try again")
        }
    }
}

extension Personalizer {
    /// Adds the biometric factor: the user must have a finger enrolled with fprintd and prove it on the reader
    /// first. The manager then accepts it for this device, bound to the fingers enrolled now, and this machine
    /// remembers both.
    public func finishAddBiometricFactor(
        request: ApiAccessAddFactor, prompt: (String) -> Void
    ) throws -> [AuthenticatorType] {
        let entity = request.grant.entity
        let enrolment = try fingerprints.boundEnrolment(user: entity.localUser)
        try fingerprints.check(user: entity.localUser, prompt: prompt)
        guard try fingerprints.boundEnrolment(user: entity.localUser) == enrolment else {
            throw XignSdkError(.biometricMismatch, "the enrolled fingers changed while the finger was read; try again")
        }
        let factors = try finishAddFactor(request: request, factor: .biometric, biometricEnrolment: enrolment)
        try store.update { contents in
            guard let index = contents.entries.firstIndex(where: { $0.idmIdentifier == entity.idmIdentifier }) else {
                return
            }
            contents.entries[index].addedFactors = factors.filter { $0 != .device && $0 != .pin }
            contents.entries[index].biometricEnrolment = enrolment
        }
        return factors
    }
}
