import FoundationEssentials
import XignCrypto

/// The personalization initialization data: what the activation QR code, deep link and mail carry.
///
/// Nothing here depends on the PIN, so holding the payload gives no way to test a PIN offline:
/// the activation secret only lets its holder *ask the manager*, which counts every guess.
public struct PersonalizationPayload: Equatable, Sendable {
    public var managerURL: ManagerURL
    /// The activation id (pid): 16 random bytes as 32 lowercase hex digits.
    public var activationId: String
    /// 32 random bytes, base64url. Without it nobody can even ask the manager about this activation.
    public var activationSecret: String
    /// base64url(SHA-256(SPKI)) of the manager's signing key, pinned at personalization.
    public var managerKeyFingerprint: String

    public static let version = "1"
    public static let maximumLength = 1024
    /// The custom-scheme prefix: `xign://personalize?v=1&m=…&a=…&s=…&k=…`.
    public static let schemePrefix = "xign://personalize?"
    /// The App-Link path below the manager URL: `https://manager/base/link/personalize#v=1&a=…&s=…&k=…`.
    /// The fragment keeps the secret out of web-server logs.
    public static let appLinkPath = "/link/personalize"

    public init(managerURL: ManagerURL, activationId: String, activationSecret: String, managerKeyFingerprint: String) {
        self.managerURL = managerURL
        self.activationId = activationId
        self.activationSecret = activationSecret
        self.managerKeyFingerprint = managerKeyFingerprint
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    /// The custom-scheme form, used in QR codes.
    public var deepLink: String {
        Self.schemePrefix + "v=\(Self.version)&m=\(PercentEncoding.encode(managerURL.description))"
            + "&a=\(activationId)&s=\(activationSecret)&k=\(managerKeyFingerprint)"
    }

    /// The https App-Link form, for mail clients that do not open custom schemes.
    public var appLink: String {
        managerURL.description + Self.appLinkPath + "#v=\(Self.version)&a=\(activationId)&s=\(activationSecret)&k=\(managerKeyFingerprint)"
    }

    /// Accepts either form, surrounded by white space.
    public init(parsing input: String) throws {
        let text = input.trimmed
        func fail(_ why: String) -> ParseError {
            ParseError(description: "activation data is not valid: \(why). Copy the whole xign://personalize link from the activation mail, or scan the QR code again")
        }
        guard text.utf8.count <= Self.maximumLength else { throw fail("it is longer than \(Self.maximumLength) characters") }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else { throw fail("it contains spaces or non-ASCII characters") }
        let fields: [String: String]
        let managerURL: ManagerURL
        if text.lowercased().hasPrefix(Self.schemePrefix) {
            fields = try Self.fields(text.dropFirst(Self.schemePrefix.count), fail)
            guard let encoded = fields["m"], let decoded = PercentEncoding.decode(encoded) else {
                throw fail("the manager address (m) is missing or badly encoded")
            }
            do { managerURL = try ManagerURL(decoded) } catch { throw fail("\(error)") }
        } else if let hash = text.firstIndex(of: "#"), text[..<hash].hasSuffix(Self.appLinkPath) {
            let base = text[..<hash].dropLast(Self.appLinkPath.count)
            do { managerURL = try ManagerURL(String(base)) } catch { throw fail("\(error)") }
            fields = try Self.fields(text[text.index(after: hash)...], fail)
            guard fields["m"] == nil else { throw fail("an App-Link must not name another manager (m)") }
        } else {
            throw fail("it starts neither with \(Self.schemePrefix) nor is an https …\(Self.appLinkPath)# link")
        }
        guard fields["v"] == Self.version else { throw fail("version \(fields["v"] ?? "(none)") is not supported, expected \(Self.version)") }
        func token(_ key: String, bytes: Int, _ name: String) throws -> String {
            guard let value = fields[key], let raw = Base64URL.decode(value), raw.count == bytes else {
                throw fail("the \(name) (\(key)) is missing or malformed")
            }
            return value
        }
        guard let activationId = fields["a"], activationId.utf8.count == 32,
              activationId.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) })
        else { throw fail("the activation id (a) is missing or malformed") }
        self.init(
            managerURL: managerURL,
            activationId: activationId,
            activationSecret: try token("s", bytes: 32, "activation secret"),
            managerKeyFingerprint: try token("k", bytes: 32, "manager key fingerprint")
        )
    }

    private static func fields(_ query: Substring, _ fail: (String) -> ParseError) throws -> [String: String] {
        var result: [String: String] = [:]
        for pair in query.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard parts.count == 2 else { throw fail("'\(pair.prefix(20))' is not key=value") }
            let key = String(parts[0])
            guard result[key] == nil else { throw fail("the field \(key) appears twice") }
            result[key] = String(parts[1])
        }
        return result
    }

    /// Finds the payload in an activation mail: the X-Xign-Personalization header, else the first link in the body.
    public init(parsingMail mail: String) throws {
        guard mail.utf8.count <= 256 * 1024 else { throw ParseError(description: "the mail file is larger than 256 KiB; is it the activation mail?") }
        let lines = mail.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for line in lines {
            if line.isEmpty { break }
            if line.lowercased().hasPrefix(Self.mailHeader.lowercased() + ":") {
                try self.init(parsing: String(line.dropFirst(Self.mailHeader.count + 1)))
                return
            }
        }
        if let line = lines.first(where: { $0.contains(Self.schemePrefix) }), let start = line.firstRange(of: Self.schemePrefix) {
            try self.init(parsing: String(line[start.lowerBound...].prefix { !$0.isWhitespace }))
            return
        }
        throw ParseError(description: "the mail contains no activation data (no \(Self.mailHeader) header and no xign://personalize link)")
    }

    public static let mailHeader = "X-Xign-Personalization"
}

/// RFC 3986 percent-encoding of everything but the unreserved characters.
public enum PercentEncoding {
    public static func encode(_ text: String) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
            }
        }
        return out
    }

    public static func decode(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8).makeIterator()
        while let byte = iterator.next() {
            if byte == UInt8(ascii: "%") {
                guard let high = iterator.next(), let low = iterator.next(),
                      let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

extension StringProtocol {
    /// Without leading and trailing white space and newlines.
    public var trimmed: String {
        String(drop(while: \.isWhitespace).reversed().drop(while: \.isWhitespace).reversed())
    }
}
