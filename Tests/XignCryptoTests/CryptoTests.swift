import COpenSSL
import FoundationEssentials
import Testing
import XignCrypto

@Suite struct CryptoTests {
    @Test func signaturesVerifyAndTamperingFails() throws {
        let key = try P256PrivateKey()
        let message = Data("hello".utf8)
        let signature = try key.signature(for: message)
        #expect(signature.count == 64)
        #expect(key.publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(signature, for: Data("hellO".utf8)))
        var flipped = signature
        flipped[10] ^= 1
        #expect(!key.publicKey.isValidSignature(flipped, for: message))
        #expect(try !P256PrivateKey().publicKey.isValidSignature(signature, for: message))
        #expect(!key.publicKey.isValidSignature(Data(signature.prefix(63)), for: message))
    }

    /// A public key is parsed once and shared: copies on many threads verify with it at once while others are dropped,
    /// and a key is still good after every copy but one went. `make fuzz` runs the same under AddressSanitizer with
    /// optimization on (target public-keys), where a key freed while in use shows.
    @Test func oneParsedKeyServesCopiesOnManyThreads() async throws {
        let key = try P256PrivateKey()
        let messages = (0..<8).map { Data("message \($0)".utf8) }
        let signatures = try messages.map { try key.signature(for: $0) }
        var shared: P256PublicKey? = key.publicKey
        let results = try await withThrowingTaskGroup(of: Bool.self) { group in
            for index in 0..<64 {
                let copy = try #require(shared)
                group.addTask {
                    (0..<50).allSatisfy { round in
                        copy.isValidSignature(signatures[index % 8], for: messages[index % 8])
                            && !copy.isValidSignature(signatures[(index + 1) % 8], for: messages[index % 8])
                            && round >= 0
                    }
                }
            }
            shared = nil
            return try await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.count == 64 && results.allSatisfy { $0 })
        let survivor = try P256PublicKey(derRepresentation: key.publicKey.derRepresentation)
        #expect(survivor.isValidSignature(signatures[0], for: messages[0]))
        #expect(try key.sharedSecret(with: survivor) == (try key.sharedSecret(with: key.publicKey)))
    }

    @Test func keysRoundTripThroughPEMAndDER() throws {
        let key = try P256PrivateKey()
        let again = try P256PrivateKey(pemRepresentation: try key.pemRepresentation())
        #expect(again.publicKey == key.publicKey)
        let der = key.publicKey.derRepresentation
        #expect(try P256PublicKey(derRepresentation: der) == key.publicKey)
        #expect(try P256PublicKey(x963Representation: der.suffix(65)) == key.publicKey)
        #expect(throws: CryptoError.self) { try P256PublicKey(derRepresentation: Data(der.dropLast())) }
        #expect(throws: CryptoError.self) {
            try P256PrivateKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")
        }
    }

    /// One key, one encoding, one fingerprint: trailing bytes or a compressed point are refused, the canonical form is not.
    @Test func publicKeysParseStrictly() throws {
        let key = try P256PrivateKey().publicKey
        let der = key.derRepresentation
        #expect(try P256PublicKey(derRepresentation: der).fingerprint == key.fingerprint)
        #expect(throws: CryptoError.self) { try P256PublicKey(derRepresentation: der + Data([0x00])) }
        #expect(throws: CryptoError.self) { try P256PublicKey(derRepresentation: der + Data([0x04, 0x00])) }
        // The same point compressed (OpenSSL alone would take it): 0x02 or 0x03 by the parity of y.
        let point = key.point
        let compressed =
            Data([
                0x30, 0x39, 0x30, 0x13, 0x06, 0x07, 0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01, 0x06, 0x08, 0x2A, 0x86,
                0x48, 0xCE,
                0x3D, 0x03, 0x01, 0x07, 0x03, 0x22, 0x00, 0x02 | (point.last! & 1),
            ]) + point.dropFirst().prefix(32)
        var loaded: OpaquePointer? = compressed.withUnsafeBytes { raw in
            var cursor = raw.bindMemory(to: UInt8.self).baseAddress
            return d2i_PUBKEY(nil, &cursor, raw.count)
        }
        #expect(loaded != nil)
        EVP_PKEY_free(loaded)
        loaded = nil
        #expect(throws: CryptoError.self) { try P256PublicKey(derRepresentation: compressed) }
    }

    @Test func sealedPINsOpenOnlyWithTheKeyAndBindingTheyWereMadeFor() throws {
        let manager = try P256PrivateKey()
        let binding = Data("authentication\nid\nchallenge".utf8)
        let sealed = try PINSeal.seal("246810", to: manager.publicKey, binding: binding)
        #expect(try PINSeal.open(sealed, with: manager, binding: binding) == "246810")
        // The length of the PIN does not show.
        let longer = try PINSeal.seal("2468101214161820", to: manager.publicKey, binding: binding)
        #expect(longer.ciphertext.count == sealed.ciphertext.count)
        #expect(longer.ephemeralPoint != sealed.ephemeralPoint)
        #expect(throws: CryptoError.self) { try PINSeal.open(sealed, with: P256PrivateKey(), binding: binding) }
        #expect(throws: CryptoError.self) {
            try PINSeal.open(sealed, with: manager, binding: Data("authentication\nid\nother".utf8))
        }
        for index in [0, 40, sealed.ciphertext.count - 1] {
            var changed = sealed.ciphertext
            changed[index] ^= 1
            #expect(throws: CryptoError.self) {
                try PINSeal.open(
                    .init(ephemeralPoint: sealed.ephemeralPoint, ciphertext: changed), with: manager, binding: binding)
            }
        }
        #expect(throws: CryptoError.self) { try PINSeal.seal("", to: manager.publicKey, binding: binding) }
        #expect(throws: CryptoError.self) {
            try PINSeal.seal(String(repeating: "1", count: 65), to: manager.publicKey, binding: binding)
        }
        #expect(
            try PINSeal.open(
                PINSeal.seal(String(repeating: "1", count: 64), to: manager.publicKey, binding: binding), with: manager,
                binding: binding
            ).count == 64)
    }

    /// RFC 5869's first test case.
    @Test func hkdfMatchesItsSpecification() {
        let secret = Data(repeating: 0x0B, count: 22)
        let salt = Data((0x00...0x0C).map { UInt8($0) })
        let info = Data((0xF0...0xF9).map { UInt8($0) })
        let expected = "3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865"
        #expect(
            HKDF.derive(secret: secret, salt: salt, info: info, length: 42).map {
                String(Int($0) + 0x100, radix: 16).dropFirst()
            }.joined()
                == expected)
    }

    @Test func derAndRawSignaturesConvert() throws {
        let raw = try P256PrivateKey().signature(for: Data("x".utf8))
        let der = try #require(ECDSASignature.der(fromRaw: raw))
        #expect(ECDSASignature.raw(fromDER: der) == raw)
        #expect(ECDSASignature.raw(fromDER: Data([0x30, 0x01])) == nil)
    }

    @Test func jwsVerifiesOnlyWithTheRightKeyAndType() throws {
        let key = try P256PrivateKey()
        let header = JWS.Header(typ: "t", kid: key.publicKey.fingerprint)
        let compact = try JWS.sign(payload: Data("{\"a\":1}".utf8), header: header, with: key)
        #expect(try JWS.verify(compact, expectedType: "t", key: key.publicKey) == Data("{\"a\":1}".utf8))
        #expect(throws: JWS.Failure.self) { try JWS.verify(compact, expectedType: "other", key: key.publicKey) }
        #expect(throws: JWS.Failure.wrongKey) {
            try JWS.verify(compact, expectedType: "t", key: P256PrivateKey().publicKey)
        }
        // A payload swapped under the same signature fails.
        let parts = compact.split(separator: ".")
        let forged = "\(parts[0]).\(Base64URL.encode(Data("{\"a\":2}".utf8))).\(parts[2])"
        #expect(throws: JWS.Failure.badSignature) { try JWS.verify(forged, expectedType: "t", key: key.publicKey) }
        // "alg": "none" is refused before any key is consulted.
        let none = Base64URL.encode(Data("{\"alg\":\"none\",\"kid\":\"k\",\"typ\":\"t\"}".utf8)) + "." + parts[1] + "."
        #expect(throws: JWS.Failure.self) { try JWS.parse(none) }
    }

    @Test func knownAnswerVectors() throws {
        #expect(SHA256.hash("abc").hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        // RFC 7914 §11: PBKDF2-HMAC-SHA256("passwd", "salt", 1), first 32 bytes.
        let derived = try PBKDF2.deriveKey(password: Data("passwd".utf8), salt: Data("salt".utf8), iterations: 1)
        #expect(derived.hex == "55ac046e56e3089fec1691c22544b605f94185216dde0465e68b9d57c20dacbc")
        // RFC 7914 §11, 80,000 iterations.
        let long = try PBKDF2.deriveKey(password: Data("Password".utf8), salt: Data("NaCl".utf8), iterations: 80_000)
        #expect(long.hex == "4ddcd8f60b98be21830cee5ef22701f9641a4418d04c0414aeff08876b34ab56")
        // And OpenSSL's own PKCS5_PBKDF2_HMAC for passwords on both sides of the 64-byte HMAC block, empty salts
        // and iteration counts around the loop's edges.
        for (length, iterations) in [(0, 1), (5, 2), (63, 3), (64, 10), (65, 7), (200, 1000)] {
            let password = Data((0..<length).map { UInt8(($0 * 7 + 3) % 256) }),
                salt = Data((0..<(length % 40)).map { UInt8($0) })
            var expected = [UInt8](repeating: 0, count: 32)
            let ok = password.withUnsafeBytes { p in
                salt.withUnsafeBytes { s in
                    PKCS5_PBKDF2_HMAC(
                        p.bindMemory(to: CChar.self).baseAddress, Int32(p.count),
                        s.bindMemory(to: UInt8.self).baseAddress, Int32(s.count),
                        Int32(iterations), EVP_sha256(), 32, &expected)
                }
            }
            #expect(ok == 1)
            #expect(
                try PBKDF2.deriveKey(password: password, salt: salt, iterations: iterations) == Data(expected),
                "password \(length) bytes, \(iterations) iterations")
        }
        // RFC 4231 test case 2.
        let mac = HMACSHA256.authenticationCode(for: Data("what do ya want for nothing?".utf8), key: Data("Jefe".utf8))
        #expect(mac.hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func base64URLAndConstantTimeEquality() throws {
        #expect(Base64URL.encode(Data([0xFB, 0xFF])) == "-_8")
        #expect(Base64URL.decode("-_8") == Data([0xFB, 0xFF]))
        #expect(Base64URL.decode("ab=") == nil)
        #expect(Base64URL.decode("a b") == nil)
        // Every length and every byte value round-trips, and matches base64 with the URL alphabet and no padding.
        for length in 0..<70 {
            let data = Data((0..<length).map { UInt8(($0 * 37 + length * 11) % 256) })
            let encoded = Base64URL.encode(data)
            #expect(Base64URL.decode(encoded) == data)
            let standard = data.base64EncodedString()
            #expect(encoded == String(standard.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }.filter { $0 != "=" }))
        }
        #expect(constantTimeEquals(Data([1, 2]), Data([1, 2])))
        #expect(!constantTimeEquals(Data([1, 2]), Data([1, 3])))
        #expect(!constantTimeEquals(Data([1, 2]), Data([1, 2, 3])))
        #expect(try SecureRandom.identifier().count == 32)
    }
}

extension Data {
    var hex: String {
        let digits = Array("0123456789abcdef")
        return String(flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] })
    }
}
