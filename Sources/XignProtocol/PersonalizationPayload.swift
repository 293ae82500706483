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
    /// 16 random bytes in base32 (32 bytes in base64url before the compact form). Without it nobody can even ask
    /// the manager about this activation; the manager keeps only its SHA-256.
    public var activationSecret: String
    /// Of the manager's signing key, pinned at personalization: its `shortFingerprint` (base32, 128 bits), or the
    /// full base64url SHA-256 of its SPKI in links from before the compact form.
    public var managerKeyFingerprint: String

    public static let version = "1"
    public static let maximumLength = 1024
    /// The custom-scheme prefix: `xign://personalize?v=1&m=…&a=…&s=…&k=…`.
    public static let schemePrefix = "xign://personalize?"
    /// The compact form for QR codes: `XIGN://P/<id><secret><fingerprint>/<MANAGER URL>`, the three 26 characters of
    /// base32 each and the URL's scheme and host in upper case, so all but a URL path takes QR alphanumeric mode: with a
    /// URL of up to 26 characters it is a version 4 code (41 modules with the quiet zone, 21 terminal lines).
    public static let compactPrefix = "XIGN://P/"
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

    /// The form for QR codes and the mail: compact where secret and fingerprint have their short forms, else the
    /// custom-scheme form.
    public var deepLink: String {
        if let id = Self.hexBytes(activationId), Self.isShort(activationSecret), Self.isShort(managerKeyFingerprint) {
            return Self.compactPrefix
                + "\(Base32.encode(id))\(activationSecret)\(managerKeyFingerprint)/\(managerURL.upperCased)"
        }
        return Self.schemePrefix + "v=\(Self.version)&m=\(PercentEncoding.encode(managerURL.description))"
            + "&a=\(activationId)&s=\(activationSecret)&k=\(managerKeyFingerprint)"
    }

    /// 16 bytes in base32, as the compact form carries secrets and fingerprints.
    static func isShort(_ value: String) -> Bool {
        value.utf8.count == 26 && Base32.decode(value)?.count == 16 && value == value.uppercased()
    }

    static func hexBytes(_ hex: String) -> Data? {
        guard hex.utf8.count == 32 else { return nil }
        var bytes = Data()
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        return bytes
    }

    /// The https App-Link form, for mail clients that do not open custom schemes.
    public var appLink: String {
        managerURL.description + Self.appLinkPath
            + "#v=\(Self.version)&a=\(activationId)&s=\(activationSecret)&k=\(managerKeyFingerprint)"
    }

    /// Accepts either form, surrounded by white space.
    public init(parsing input: String) throws {
        let text = input.trimmed
        func fail(_ why: String) -> ParseError {
            ParseError(
                description:
                    "activation data is not valid: \(why). Copy the whole xign://personalize link from the activation mail, or scan the QR code again"
            )
        }
        guard text.utf8.count <= Self.maximumLength else {
            throw fail("it is longer than \(Self.maximumLength) characters")
        }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw fail("it contains spaces or non-ASCII characters")
        }
        let fields: [String: String]
        let managerURL: ManagerURL
        if text.uppercased().hasPrefix(Self.compactPrefix) {
            let parts = text.dropFirst(Self.compactPrefix.count).split(
                separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            let fields = Array(parts[0].uppercased())
            guard parts.count == 2, fields.count == 78 else {
                throw fail("it does not hold an activation id, a secret and a fingerprint of 26 characters each")
            }
            guard let id = Base32.decode(String(fields[0..<26])), id.count == 16 else {
                throw fail("the activation id is malformed")
            }
            let secret = String(fields[26..<52]), fingerprint = String(fields[52..<78])
            guard Self.isShort(secret) else { throw fail("the activation secret is malformed") }
            guard Self.isShort(fingerprint) else { throw fail("the manager key fingerprint is malformed") }
            do { managerURL = try ManagerURL(String(parts[1])) } catch { throw fail("\(error)") }
            self.init(
                managerURL: managerURL, activationId: id.map { String($0, radix: 16).leftPadded(to: 2) }.joined(),
                activationSecret: secret, managerKeyFingerprint: fingerprint)
            return
        }
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
            throw fail(
                "it starts neither with \(Self.compactPrefix) nor \(Self.schemePrefix), nor is an https …\(Self.appLinkPath)# link"
            )
        }
        guard fields["v"] == Self.version else {
            throw fail("version \(fields["v"] ?? "(none)") is not supported, expected \(Self.version)")
        }
        func token(_ key: String, bytes: Int, _ name: String) throws -> String {
            guard let value = fields[key] else { throw fail("the \(name) (\(key)) is missing or malformed") }
            if Self.isShort(value) { return value }
            guard let raw = Base64URL.decode(value), raw.count == bytes else {
                throw fail("the \(name) (\(key)) is missing or malformed")
            }
            return value
        }
        guard let activationId = fields["a"], activationId.utf8.count == 32,
            activationId.utf8.allSatisfy({
                (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0)
                    || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0)
            })
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
        guard mail.utf8.count <= 256 * 1024 else {
            throw ParseError(description: "the mail file is larger than 256 KiB; is it the activation mail?")
        }
        let lines = mail.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        for line in lines {
            if line.isEmpty { break }
            if line.lowercased().hasPrefix(Self.mailHeader.lowercased() + ":") {
                try self.init(parsing: String(line.dropFirst(Self.mailHeader.count + 1)))
                return
            }
        }
        for prefix in [Self.compactPrefix, Self.schemePrefix] {
            if let line = lines.first(where: { $0.contains(prefix) }), let start = line.firstRange(of: prefix) {
                try self.init(parsing: String(line[start.lowerBound...].prefix { !$0.isWhitespace }))
                return
            }
        }
        throw ParseError(
            description:
                "the mail contains no activation data (no \(Self.mailHeader) header and no XIGN://P/ or xign://personalize link)"
        )
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
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
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
                    let value = UInt8(String(decoding: [high, low], as: UTF8.self), radix: 16)
                else { return nil }
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
