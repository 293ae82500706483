import COpenSSL
import FoundationEssentials

public enum SHA256 {
    public static func hash(_ data: Data) -> Data {
        var digest = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBytes { raw in
            _ = COpenSSL.SHA256(raw.bindMemory(to: UInt8.self).baseAddress, raw.count, &digest)
        }
        return Data(digest)
    }

    public static func hash(_ string: String) -> Data { hash(Data(string.utf8)) }
}

public enum HMACSHA256 {
    public static func authenticationCode(for message: Data, key: Data) -> Data {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 32
        key.withUnsafeBytes { k in
            message.withUnsafeBytes { m in
                _ = HMAC(
                    EVP_sha256(), k.baseAddress, Int32(k.count),
                    m.bindMemory(to: UInt8.self).baseAddress, m.count, &out, &length
                )
            }
        }
        return Data(out.prefix(Int(length)))
    }
}

public enum PBKDF2 {
    /// PBKDF2-HMAC-SHA256 with a 32-byte output (one block).
    ///
    /// The HMAC key schedule runs once: the SHA-256 states after the inner and the outer padded key are copied for
    /// each iteration, so an iteration costs two compressions. OpenSSL 3's PKCS5_PBKDF2_HMAC copies and cleans
    /// whole EVP contexts per iteration and took twice as long, which was a quarter of the manager's CPU per login.
    public static func deriveKey(password: Data, salt: Data, iterations: Int) throws -> Data {
        guard iterations > 0, iterations <= 10_000_000 else { throw CryptoError("PBKDF2 iteration count out of range") }
        guard salt.count <= 1024 else { throw CryptoError("PBKDF2 salt is too long") }
        var key = [UInt8](password.count > 64 ? SHA256.hash(password) : password)
        key += [UInt8](repeating: 0, count: 64 - key.count)
        var inner = SHA256_CTX(), outer = SHA256_CTX(), context = SHA256_CTX()
        var pad = key.map { $0 ^ 0x36 }
        SHA256_Init(&inner)
        SHA256_Update(&inner, pad, 64)
        pad = key.map { $0 ^ 0x5C }
        SHA256_Init(&outer)
        SHA256_Update(&outer, pad, 64)
        var block = [UInt8](repeating: 0, count: 32), result = [UInt8](repeating: 0, count: 32)
        defer {
            OPENSSL_cleanse(&key, key.count)
            OPENSSL_cleanse(&pad, pad.count)
            OPENSSL_cleanse(&block, block.count)
            withUnsafeMutableBytes(of: &inner) { OPENSSL_cleanse($0.baseAddress, $0.count) }
            withUnsafeMutableBytes(of: &outer) { OPENSSL_cleanse($0.baseAddress, $0.count) }
            withUnsafeMutableBytes(of: &context) { OPENSSL_cleanse($0.baseAddress, $0.count) }
        }
        // U1 = HMAC(password, salt || INT(1)); then Uj = HMAC(password, Uj-1), and the result is their XOR.
        let first = [UInt8](salt) + [0, 0, 0, 1]
        context = inner
        SHA256_Update(&context, first, first.count)
        SHA256_Final(&block, &context)
        context = outer
        SHA256_Update(&context, block, 32)
        SHA256_Final(&block, &context)
        result = block
        block.withUnsafeMutableBufferPointer { u in
            result.withUnsafeMutableBufferPointer { t in
                for _ in 1..<iterations {
                    context = inner
                    SHA256_Update(&context, u.baseAddress, 32)
                    SHA256_Final(u.baseAddress, &context)
                    context = outer
                    SHA256_Update(&context, u.baseAddress, 32)
                    SHA256_Final(u.baseAddress, &context)
                    for i in 0..<32 { t[i] ^= u[i] }
                }
            }
        }
        return Data(result)
    }
}

public enum SecureRandom {
    public static func bytes(_ count: Int) throws -> Data {
        var out = [UInt8](repeating: 0, count: count)
        guard RAND_bytes(&out, Int32(count)) == 1 else { throw CryptoError("RAND_bytes") }
        return Data(out)
    }

    /// A random token of `byteCount` bytes, base64url without padding.
    public static func token(byteCount: Int = 32) throws -> String { Base64URL.encode(try bytes(byteCount)) }

    /// 16 random bytes as 32 lowercase hex digits: ids that are safe in file names and on a command line.
    public static func identifier() throws -> String {
        let digits = Array("0123456789abcdef".utf8)
        return String(
            decoding: try bytes(16).flatMap { [digits[Int($0 >> 4)], digits[Int($0 & 0x0F)]] }, as: UTF8.self)
    }
}

/// Compares in time that depends only on the lengths, never on where the bytes differ.
public func constantTimeEquals(_ a: Data, _ b: Data) -> Bool {
    guard a.count == b.count else { return false }
    if a.isEmpty { return true }
    return a.withUnsafeBytes { x in b.withUnsafeBytes { y in CRYPTO_memcmp(x.baseAddress, y.baseAddress, x.count) == 0 }
    }
}

/// base64url without padding (RFC 4648 §5), as JWS and our payloads use it.
public enum Base64URL {
    // Byte by byte: String.replacing was a twentieth of the manager's CPU per login.
    public static func encode(_ data: Data) -> String {
        var bytes = [UInt8](data.base64EncodedData())
        while bytes.last == UInt8(ascii: "=") { bytes.removeLast() }
        for i in bytes.indices {
            if bytes[i] == UInt8(ascii: "+") {
                bytes[i] = UInt8(ascii: "-")
            } else if bytes[i] == UInt8(ascii: "/") {
                bytes[i] = UInt8(ascii: "_")
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    /// Returns nil for anything outside the base64url alphabet, including padding and whitespace.
    public static func decode(_ text: String) -> Data? {
        guard text.utf8.allSatisfy({ isAlphabet($0) }), text.utf8.count % 4 != 1 else { return nil }
        var bytes = text.utf8.map {
            $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0
        }
        bytes += [UInt8](repeating: UInt8(ascii: "="), count: (4 - bytes.count % 4) % 4)
        return Data(base64Encoded: Data(bytes))
    }

    /// Whether `byte` is one of base64url's 64 characters (no padding).
    public static func isAlphabet(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}

/// RFC 4648 base32 without padding, upper case: what a QR code holds in alphanumeric mode.
public enum Base32 {
    public static let alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"

    public static func encode(_ data: Data) -> String {
        let symbols = Array(alphabet.utf8)
        var output: [UInt8] = []
        var buffer = 0, bits = 0
        for byte in data {
            buffer = (buffer << 8) | Int(byte)
            bits += 8
            while bits >= 5 {
                output.append(symbols[(buffer >> (bits - 5)) & 31])
                bits -= 5
            }
            buffer &= (1 << bits) - 1
        }
        if bits > 0 { output.append(symbols[(buffer << (5 - bits)) & 31]) }
        return String(decoding: output, as: UTF8.self)
    }

    /// Decodes upper- or lower-case text; nil for other characters, or left-over bits that are not zero.
    public static func decode(_ text: String) -> Data? {
        let symbols = Array(alphabet.utf8)
        var output = Data()
        var buffer = 0, bits = 0
        for byte in text.uppercased().utf8 {
            guard let value = symbols.firstIndex(of: byte) else { return nil }
            buffer = (buffer << 5) | value
            bits += 5
            if bits >= 8 {
                output.append(UInt8((buffer >> (bits - 8)) & 0xFF))
                bits -= 8
            }
            buffer &= (1 << bits) - 1
        }
        return buffer == 0 ? output : nil
    }
}
