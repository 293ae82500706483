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
        #expect(try key.publicKey.isValidSignature(signature, for: message))
        #expect(try !key.publicKey.isValidSignature(signature, for: Data("hellO".utf8)))
        var flipped = signature
        flipped[10] ^= 1
        #expect(try !key.publicKey.isValidSignature(flipped, for: message))
        #expect(try !P256PrivateKey().publicKey.isValidSignature(signature, for: message))
        #expect(try !key.publicKey.isValidSignature(Data(signature.prefix(63)), for: message))
    }

    @Test func keysRoundTripThroughPEMAndDER() throws {
        let key = try P256PrivateKey()
        let again = try P256PrivateKey(pemRepresentation: try key.pemRepresentation())
        #expect(try again.publicKey == key.publicKey)
        let der = try key.publicKey.derRepresentation
        #expect(try P256PublicKey(derRepresentation: der) == key.publicKey)
        #expect(try P256PublicKey(x963Representation: der.suffix(65)) == key.publicKey)
        #expect(throws: CryptoError.self) { try P256PublicKey(derRepresentation: Data(der.dropLast())) }
        #expect(throws: CryptoError.self) { try P256PrivateKey(pemRepresentation: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n") }
    }

    @Test func derAndRawSignaturesConvert() throws {
        let raw = try P256PrivateKey().signature(for: Data("x".utf8))
        let der = try #require(ECDSASignature.der(fromRaw: raw))
        #expect(ECDSASignature.raw(fromDER: der) == raw)
        #expect(ECDSASignature.raw(fromDER: Data([0x30, 0x01])) == nil)
    }

    @Test func jwsVerifiesOnlyWithTheRightKeyAndType() throws {
        let key = try P256PrivateKey()
        let header = JWS.Header(typ: "t", kid: try key.publicKey.fingerprint)
        let compact = try JWS.sign(payload: Data("{\"a\":1}".utf8), header: header, with: key)
        #expect(try JWS.verify(compact, expectedType: "t", key: key.publicKey) == Data("{\"a\":1}".utf8))
        #expect(throws: JWS.Failure.self) { try JWS.verify(compact, expectedType: "other", key: key.publicKey) }
        #expect(throws: JWS.Failure.wrongKey) { try JWS.verify(compact, expectedType: "t", key: P256PrivateKey().publicKey) }
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
            let password = Data((0..<length).map { UInt8(($0 * 7 + 3) % 256) }), salt = Data((0..<(length % 40)).map { UInt8($0) })
            var expected = [UInt8](repeating: 0, count: 32)
            let ok = password.withUnsafeBytes { p in
                salt.withUnsafeBytes { s in
                    PKCS5_PBKDF2_HMAC(
                        p.bindMemory(to: CChar.self).baseAddress, Int32(p.count), s.bindMemory(to: UInt8.self).baseAddress, Int32(s.count),
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
