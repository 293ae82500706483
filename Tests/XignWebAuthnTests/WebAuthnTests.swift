import FoundationEssentials
import Testing
import XignCrypto
import XignWebAuthn

/// The parser and the ceremony checks against what Chromium's authenticator produced (captured once from
/// `navigator.credentials.create` and `.get` on http://localhost:8765), then each check refusing with a control.
@Suite struct WebAuthnTests {
    // Chromium 131, virtual CTAP2 authenticator (internal transport, user verification), attestation none.
    static let chromium = (
        attestationObject:
            "o2NmbXRkbm9uZWdhdHRTdG10oGhhdXRoRGF0YVikSZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2NFAAAAAQECAwQFBgcIAQIDBAUGBwgAIJgbA-vpbJQhZ8eJW4_Cra6pamAjurGIoMf2PhfisWOcpQECAyYgASFYIJm0v6NngkPlvpkDCQXbYvBWajEI7h0_We_sAA65V28XIlggHx3TN0_jYyLTdpLQXYioXxPKCYzREMsBYf3Fz03bvH8",
        createClientData:
            "eyJ0eXBlIjoid2ViYXV0aG4uY3JlYXRlIiwiY2hhbGxlbmdlIjoiQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQSIsIm9yaWdpbiI6Imh0dHA6Ly9sb2NhbGhvc3Q6ODc2NSIsImNyb3NzT3JpZ2luIjpmYWxzZX0",
        credentialId: "mBsD6-lslCFnx4lbj8KtrqlqYCO6sYigx_Y-F-KxY5w",
        authenticatorData: "SZYN5YgOjGh0NBcPZHZgW4_krrmihjLHmVzzuoMdl2MFAAAAAg",
        getClientData:
            "eyJ0eXBlIjoid2ViYXV0aG4uZ2V0IiwiY2hhbGxlbmdlIjoiQ1FrSiIsIm9yaWdpbiI6Imh0dHA6Ly9sb2NhbGhvc3Q6ODc2NSIsImNyb3NzT3JpZ2luIjpmYWxzZSwib3RoZXJfa2V5c19jYW5fYmVfYWRkZWRfaGVyZSI6ImRvIG5vdCBjb21wYXJlIGNsaWVudERhdGFKU09OIGFnYWluc3QgYSB0ZW1wbGF0ZS4gU2VlIGh0dHBzOi8vZ29vLmdsL3lhYlBleCJ9",
        signature: "MEUCIBse-w7fSuNG-J5tmFj-IrVpgcmebhrFQkQK3qXoOm9WAiEAo8OD4JT54wrsDSV_qi9qDQvJl4D1aq7d9lSJyAhAyiI"
    )
    static let party = RelyingParty(origin: "http://localhost:8765", id: "localhost")
    static func bytes(_ text: String) -> Data { Base64URL.decode(text)! }

    func chromiumCredential(_ party: RelyingParty = party) throws -> PasskeyCredential {
        try party.verifyRegistration(
            attestationObject: Self.bytes(Self.chromium.attestationObject),
            clientDataJSON: Self.bytes(Self.chromium.createClientData),
            challenge: Data(count: 32))
    }

    func chromiumAssertion(clientData: String = chromium.getClientData) -> PasskeyAssertion {
        PasskeyAssertion(
            authenticatorData: Self.bytes(Self.chromium.authenticatorData), clientDataJSON: Self.bytes(clientData),
            signature: Self.bytes(Self.chromium.signature))
    }

    @Test func aRealBrowsersRegistrationAndAssertionVerify() throws {
        let credential = try chromiumCredential()
        #expect(Base64URL.encode(credential.id) == Self.chromium.credentialId)
        #expect(credential.signCount == 1)
        #expect(!credential.isBackupEligible && !credential.isBackedUp)
        #expect(credential.aaguid == Data([1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8]))
        let result = try Self.party.verifyAssertion(
            chromiumAssertion(), publicKey: credential.publicKey, challenge: Data([9, 9, 9]), storedSignCount: 1)
        #expect(result.signCount == 2 && !result.isBackedUp)
        // The header form round-trips.
        let header = chromiumAssertion().header
        #expect(try PasskeyAssertion(header: header)?.header == header)
        #expect(try PasskeyAssertion(header: "AAAA") == nil)
    }

    @Test func anAssertionIsRefusedForAnyCheckThatFails() throws {
        let credential = try chromiumCredential()
        let verify = { (party: RelyingParty, challenge: Data, stored: UInt32, key: P256PublicKey) in
            try party.verifyAssertion(
                chromiumAssertion(), publicKey: key, challenge: challenge, storedSignCount: stored)
        }
        // The control: every value right.
        #expect(throws: Never.self) { try verify(Self.party, Data([9, 9, 9]), 1, credential.publicKey) }
        let refusals: [(String, () throws -> AssertionResult)] = [
            ("another challenge", { try verify(Self.party, Data([9, 9, 8]), 1, credential.publicKey) }),
            (
                "another origin",
                {
                    try verify(
                        RelyingParty(origin: "http://localhost:8766", id: "localhost"), Data([9, 9, 9]), 1,
                        credential.publicKey)
                }
            ),
            (
                "another RP id",
                {
                    try verify(
                        RelyingParty(origin: "http://localhost:8765", id: "example.com"), Data([9, 9, 9]), 1,
                        credential.publicKey)
                }
            ),
            ("a counter that stood still", { try verify(Self.party, Data([9, 9, 9]), 2, credential.publicKey) }),
            ("a counter that went back", { try verify(Self.party, Data([9, 9, 9]), 7, credential.publicKey) }),
            ("another key", { try verify(Self.party, Data([9, 9, 9]), 1, try P256PrivateKey().publicKey) }),
        ]
        for (what, attempt) in refusals {
            #expect(throws: WebAuthnError.self, "\(what)") { try attempt() }
        }
        // A registration's clientData is no assertion's.
        #expect(throws: WebAuthnError.self) {
            try Self.party.verifyAssertion(
                chromiumAssertion(clientData: Self.chromium.createClientData), publicKey: credential.publicKey,
                challenge: Data(count: 32),
                storedSignCount: 0)
        }
    }

    @Test func aRegistrationIsRefusedForAnotherOriginChallengeOrRPId() throws {
        #expect(throws: Never.self) { try chromiumCredential() }
        for party in [
            RelyingParty(origin: "https://localhost:8765", id: "localhost"),
            RelyingParty(origin: "http://localhost:8765", id: "127.0.0.1"),
        ] {
            #expect(throws: WebAuthnError.self) { try chromiumCredential(party) }
        }
        #expect(throws: WebAuthnError.self) {
            try Self.party.verifyRegistration(
                attestationObject: Self.bytes(Self.chromium.attestationObject),
                clientDataJSON: Self.bytes(Self.chromium.createClientData),
                challenge: Data(count: 31))
        }
    }

    @Test func flagsOfUserPresenceVerificationAndBackupAreChecked() throws {
        let party = RelyingParty(origin: "https://idm.example.com", id: "idm.example.com")
        func attempt(flags: UInt8) throws -> PasskeyCredential {
            let key = try P256PrivateKey()
            var data = SHA256.hash("idm.example.com")
            data.append(flags | 0x40)
            data.append(contentsOf: [0, 0, 0, 0] + [UInt8](repeating: 0, count: 16) + [0, 1, 7])
            let point = key.publicKey.point
            data.append(
                contentsOf: [0xa5, 0x01, 0x02, 0x03, 0x26, 0x20, 0x01, 0x21, 0x58, 0x20] + point.dropFirst().prefix(32)
                    + [0x22, 0x58, 0x20]
                    + point.suffix(32))
            var object =
                Data([0xa3, 0x63]) + Data("fmt".utf8) + Data([0x64]) + Data("none".utf8) + Data([0x67])
                + Data("attStmt".utf8) + Data([0xa0])
            object += Data([0x68]) + Data("authData".utf8) + Data([0x58, UInt8(data.count)]) + data
            let client = Data(#"{"type":"webauthn.create","challenge":"AQID","origin":"https://idm.example.com"}"#.utf8)
            return try party.verifyRegistration(
                attestationObject: object, clientDataJSON: client, challenge: Data([1, 2, 3]))
        }
        #expect(try !attempt(flags: 0x05).isBackupEligible)
        let synced = try attempt(flags: 0x1d)
        #expect(synced.isBackupEligible && synced.isBackedUp)
        for flags: UInt8 in [0x04, 0x01, 0x15] {  // no UP; no UV; backed up but not eligible
            #expect(throws: WebAuthnError.self, "flags \(flags)") { try attempt(flags: flags) }
        }
    }

    @Test func cborRefusesWhatItDoesNotAcceptWithoutTrapping() throws {
        #expect(try CBORReader.decode(Data([0xa1, 0x01, 0x26]))[.unsigned(1)] == .negative(-7))
        let refused: [[UInt8]] = [
            [],  // nothing
            [0x5f],  // indefinite byte string
            [0x5a, 0xff, 0xff, 0xff, 0xff],  // a length past the input
            [0xc0, 0x00],  // a tag
            [0xf9, 0x00, 0x00],  // a float
            [0xa2, 0x01, 0x01, 0x01, 0x02],  // a repeated key
            [0x01, 0x02],  // a byte after the item
            [0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],  // a negative integer out of range
            [UInt8](repeating: 0x81, count: 40) + [0x00],  // nested too deeply
            [0x63, 0xff, 0xfe, 0xfd],  // text that is not UTF-8
        ]
        for input in refused {
            #expect(throws: WebAuthnError.self, "\(input.prefix(8))") { try CBORReader.decode(Data(input)) }
        }
        // Every cut of a real attestation object is refused, never a trap.
        let real = Self.bytes(Self.chromium.attestationObject)
        for length in 0..<real.count {
            #expect(throws: WebAuthnError.self) {
                try Self.party.verifyRegistration(
                    attestationObject: real.prefix(length), clientDataJSON: Self.bytes(Self.chromium.createClientData),
                    challenge: Data(count: 32))
            }
        }
    }
}
