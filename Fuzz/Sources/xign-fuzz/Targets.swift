import Foundation
import XignCrypto
import XignLogin
import XignManagerConfiguration
import XignProtocol
import XignWebAuthn

@testable import XignAttestation
@testable import XignCore
@testable import XignDaemon
@testable import XignDevice

/// One libFuzzer target: what it reads, fed one input. Every throw is an accepted answer; only a trap, a leak
/// the sanitizer sees or a hang is a finding.
struct FuzzTarget {
    let name: String
    let run: (_ input: Data) -> Void

    /// A key pair made once, so JWS inputs can meet a real verification. Kept as PEM bytes and read for each input:
    /// a global key's public half (a Data) looks leaked to LeakSanitizer.
    static let keyPEM = Array(try! P256PrivateKey().pemRepresentation().utf8)
    static var key: P256PrivateKey { try! P256PrivateKey(pemRepresentation: String(decoding: keyPEM, as: UTF8.self)) }
    static let pinPolicy = PinPolicyMessage(
        minLength: 5, maxLength: 64, digitsOnly: true, maxSequenceLength: 3, maxSimilarDigits: 2, blacklist: ["12345"])

    /// Made for each input: a global one's hash looks leaked to LeakSanitizer.
    static var party: RelyingParty { RelyingParty(origin: "http://localhost:8765", id: "localhost") }

    nonisolated(unsafe) static let all: [FuzzTarget] = [
        daemonSocket,
        FuzzTarget(name: "personalization-link") { input in
            let text = String(decoding: input, as: UTF8.self)
            _ = try? PersonalizationPayload(parsing: text)
            _ = try? PersonalizationInitializationData(parsing: text)
            _ = ConfirmationPayload.confirmationId(in: text)
            _ = try? HostJoinToken(parsing: text)
        },
        FuzzTarget(name: "mail") { input in
            let text = String(decoding: input, as: UTF8.self)
            _ = try? PersonalizationPayload(parsingMail: text)
            _ = try? PersonalizationInitializationData(parsingMail: text)
        },
        FuzzTarget(name: "manager-url") { input in
            guard let url = try? ManagerURL(String(decoding: input, as: UTF8.self)) else { return }
            // What parses must print back to a URL that parses to the same.
            precondition((try? ManagerURL(url.description)) == url, "\(url) does not round-trip")
        },
        FuzzTarget(name: "config") { input in
            guard let file = try? ConfigFile(text: String(decoding: input, as: UTF8.self), source: "fuzz.conf") else {
                return
            }
            _ = try? ClientConfiguration(file: file)
        },
        FuzzTarget(name: "manager-config") { input in
            guard let file = try? ConfigFile(text: String(decoding: input, as: UTF8.self), source: "manager.conf"),
                let configuration = try? ManagerConfiguration(file: file)
            else { return }
            // What loads must keep the invariants the manager relies on without checking again.
            precondition(
                configuration.pinPolicy.minLength <= configuration.pinPolicy.maxLength, "PIN lengths out of order")
            precondition(configuration.lockout.freeAttempts < configuration.lockout.maxAttempts, "no permanent lock")
            precondition(!configuration.services.isEmpty && !configuration.categories.isEmpty, "no service or category")
            for service in configuration.services {
                precondition(
                    service.roles.allSatisfy { role in role.requestedAuthenticators.allSatisfy { $0.contains(.device) }
                    }, "a role without the device"
                )
            }
            // The lock after each failure: never before now, never overflowing, permanent exactly from maxAttempts on.
            let now: Int64 = 1_800_000_000_000
            for failures in 0...(configuration.lockout.maxAttempts + 1) {
                let lock = configuration.lockout.lock(afterFailures: failures, now: now)
                precondition(
                    lock.lockedUntil >= now && lock.isPermanent == (failures >= configuration.lockout.maxAttempts),
                    "wrong lock")
            }
        },
        FuzzTarget(name: "pam-arguments") { input in
            // argv as libpam gives it: NUL-separated words.
            let arguments = input.split(separator: 0, omittingEmptySubsequences: false).map {
                String(decoding: $0, as: UTF8.self)
            }
            _ = try? LoginOptions(arguments: arguments)
        },
        FuzzTarget(name: "tpm-key-file") { input in
            guard let blob = try? TPMDeviceKeyStore.decode(input) else { return }
            precondition(
                TPMDeviceKeyStore.encode(blob) == input, "a decoded key file does not encode to the same bytes")
        },
        FuzzTarget(name: "jws") { input in
            let compact = String(decoding: input, as: UTF8.self)
            _ = try? JWS.parse(compact)
            _ = try? JWS.verify(compact, expectedType: SignedAnswerType.decrypt, key: key.publicKey)
            _ = try? P256PublicKey(derRepresentation: input)
        },
        FuzzTarget(name: "public-keys") { input in
            // A key from the wire, used the ways the code uses keys: copied, verified with while a copy goes, used
            // for ECDH. Built with optimization on, where a key freed while still in use showed (EVPKey).
            _ = try? P256PublicKey(derRepresentation: input)
            _ = try? P256PublicKey(x963Representation: input)
            let message = Data(input.prefix(512))
            guard let signature = try? key.signature(for: message) else { return }
            var keys = [key.publicKey]
            keys.append(keys[0])
            precondition(keys.removeFirst().isValidSignature(signature, for: message), "a good signature is refused")
            precondition(
                !keys[0].isValidSignature(Data(signature.reversed()), for: message), "a reversed signature is accepted")
            precondition(
                try! P256PrivateKey().publicKey.isValidSignature(signature, for: message) == false,
                "another key accepts it")
            precondition(keys.allSatisfy { Set([$0, key.publicKey]).count == 1 }, "one key hashes as two")
            _ = try? key.sharedSecret(with: keys[0])
        },
        FuzzTarget(name: "directory-query") { input in
            // What any local process sends xignd's directory socket, as root reads it.
            let bytes = [UInt8](input)
            if bytes.count >= DirectoryQuery.headerLength {
                _ = try? DirectoryQuery.keyLength(ofHeader: Array(bytes[..<DirectoryQuery.headerLength]))
            }
            guard let query = try? DirectoryQuery(parsing: bytes) else { return }
            precondition(query.encoded == bytes, "a query does not encode back to its bytes")
        },
        FuzzTarget(name: "host-directory") { input in
            // The manager's directory, and the passwd lines a host writes from what passes its checks: one line of
            // seven fields each, whatever the manager sent.
            guard let directory = try? JSONDecoder().decode(HostDirectory.self, from: input),
                (try? directory.checkLimits()) != nil
            else { return }
            for user in directory.users {
                let line = DirectoryCache.passwdLine(user)
                // Counted in Unicode scalars, as libc reads the line: a Character may hold a `:` and a combining mark.
                let scalars = line.unicodeScalars
                precondition(
                    scalars.filter { $0 == ":" }.count == 6 && scalars.filter { Character($0).isNewline }.count == 1
                        && scalars.last == "\n",
                    "a passwd line that is not one entry: \(line)")
                let entries = DirectoryFiles.entries(in: line)
                precondition(
                    entries.count == 1 && entries[0].name == user.loginName && entries[0].id == user.uid,
                    "a passwd line that reads back as another entry: \(line)")
            }
            _ = DirectoryFiles.entries(in: String(decoding: input, as: UTF8.self))
        },
        FuzzTarget(name: "wire-answers") { input in
            // Every answer the client decodes, and the error body of any status.
            let decoder = JSONDecoder()
            _ = try? decoder.decode(ErrorBody.self, from: input)
            _ = try? decoder.decode(RegistrationParametersMessage.self, from: input)
            _ = try? decoder.decode(RegisterResponse.self, from: input)
            _ = try? decoder.decode(DecryptResult.self, from: input)
            _ = try? decoder.decode(PersonalizationResultMessage.self, from: input)
            _ = try? decoder.decode(ChallengeMessage.self, from: input)
            _ = try? decoder.decode(RevocationResultMessage.self, from: input)
            _ = try? decoder.decode(AuthenticationStartMessage.self, from: input)
            _ = try? decoder.decode(AuthenticationResultMessage.self, from: input)
            _ = try? decoder.decode(LoginTokenMessage.self, from: input)
            _ = try? decoder.decode(HostJoinResult.self, from: input)
            _ = try? decoder.decode(HealthMessage.self, from: input)
            _ = try? decoder.decode(ConfirmationStartMessage.self, from: input)
            _ = try? decoder.decode(ConfirmationResultMessage.self, from: input)
            _ = try? decoder.decode(ConfirmationStateMessage.self, from: input)
            _ = try? decoder.decode(ConfirmationListMessage.self, from: input)
            _ = try? decoder.decode(ApiAccessResultMessage.self, from: input)
            _ = try? decoder.decode(AccountDevicesMessage.self, from: input)
            _ = try? decoder.decode(DaemonReply.self, from: input)
            _ = DisplayText.sanitized(String(decoding: input, as: UTF8.self))
        },
        FuzzTarget(name: "request-bodies") { input in
            // What the manager (and xignd, as root) decode from a caller, and the checks that follow.
            let decoder = JSONDecoder()
            if let request = try? decoder.decode(RegisterRequest.self, from: input) {
                _ = request.sealedPin.open(with: key, for: .registration(categoryId: request.categoryId)).map(
                    Self.pinPolicy.validate)
                for (name, value) in request.attributes { _ = AttributeValidator.validate(name: name, value: value) }
                _ = request.alias.map { AliasPolicyMessage(minLength: 1, maxLength: 64).validate($0) }
            }
            _ = try? decoder.decode(DecryptRequest.self, from: input)
            _ = try? decoder.decode(PersonalizeRequest.self, from: input)
            _ = try? decoder.decode(ChallengeRequest.self, from: input)
            _ = try? decoder.decode(RevokeRequest.self, from: input)
            _ = try? decoder.decode(AuthenticationStartRequest.self, from: input)
            _ = try? decoder.decode(AuthenticationFinishRequest.self, from: input)
            _ = try? decoder.decode(TokenRequest.self, from: input)
            _ = try? decoder.decode(HostJoinRequest.self, from: input)
            _ = try? decoder.decode(ConfirmationRequest.self, from: input)
            _ = try? decoder.decode(ConfirmationWaitRequest.self, from: input)
            _ = try? decoder.decode(ConfirmationWithdrawalRequest.self, from: input)
            _ = try? decoder.decode(PendingConfirmationsRequest.self, from: input)
            _ = try? decoder.decode(ConfirmationDenialRequest.self, from: input)
            _ = try? decoder.decode(ApiAccessRequest.self, from: input)
            _ = try? decoder.decode(AccountDevicesRequest.self, from: input)
            _ = try? decoder.decode(DaemonRequest.self, from: input)
            _ = try? decoder.decode(PasskeyPersonalizeRequest.self, from: input)
            _ = try? decoder.decode(ConfirmationViewRequest.self, from: input)
            _ = try? decoder.decode(ConfirmationApprovalRequest.self, from: input)
            _ = try? decoder.decode(WebSessionRequest.self, from: input)
            _ = try? decoder.decode(WebPendingRequest.self, from: input)
        },
        // What a client sends for TPM key attestation: an EK certificate, a key's public area, a certification.
        FuzzTarget(name: "tpm-attestation") { input in
            if let certificate = try? EndorsementCertificate(der: input) {
                precondition(certificate.der == input, "an EK certificate parsed from other bytes")
            }
            if let area = try? TPMPublicArea(tpm2bPublic: input) {
                precondition(
                    area.name.count == 34 && area.publicKey.point.count == 65, "a public area without a name or a point"
                )
            }
            _ = try? KeyCertification.parse(input)
        },
        // What a browser sends for its passkey: each parser alone, then the whole ceremony checks.
        FuzzTarget(name: "webauthn-cbor") { input in
            var reader = CBORReader(input)
            _ = try? reader.read()
            _ = try? CBORReader.decode(input)
        },
        FuzzTarget(name: "webauthn-authenticator-data") { input in
            guard let data = try? AuthenticatorData(input) else { return }
            precondition(data.raw == input && data.rpIdHash.count == 32, "authenticator data parsed into other bytes")
        },
        FuzzTarget(name: "webauthn-registration") { input in
            // The first two bytes split the input into the attestation object and the clientDataJSON.
            guard input.count >= 2 else { return }
            let split = min(Int(input[input.startIndex]) << 8 | Int(input[input.startIndex + 1]), input.count - 2)
            let body = input.dropFirst(2)
            _ = try? Self.party.verifyRegistration(
                attestationObject: Data(body.prefix(split)), clientDataJSON: Data(body.dropFirst(split)),
                challenge: Data(count: 32))
        },
        FuzzTarget(name: "webauthn-assertion") { input in
            // The signature header as it arrives, checked against a key made once.
            guard let assertion = try? PasskeyAssertion(header: String(decoding: input, as: UTF8.self)) else { return }
            _ = try? Self.party.verifyAssertion(
                assertion, publicKey: try! key.publicKey, challenge: Data([9, 9, 9]), storedSignCount: 1)
        },
        FuzzTarget(name: "sealed-pin") { input in
            // First byte 0: the rest is a PIN, which must come back from its seal, and from no other binding.
            // Otherwise a sealed PIN as the manager decodes it, opened with the manager's key.
            if input.first == 0 {
                let pin = String(decoding: input.dropFirst(), as: UTF8.self)
                guard let sealed = try? SealedPINMessage(sealing: pin, to: key.publicKey, for: .grant("g")) else {
                    return
                }
                precondition(sealed.open(with: key, for: .grant("g")) == pin, "a sealed PIN does not open to itself")
                precondition(sealed.open(with: key, for: .grant("h")) == nil, "a sealed PIN opens for another binding")
                return
            }
            guard let sealed = try? JSONDecoder().decode(SealedPINMessage.self, from: input) else { return }
            _ = sealed.open(with: key, for: .decrypt(activationId: "a", nonce: "n"))
        },
    ]
}
