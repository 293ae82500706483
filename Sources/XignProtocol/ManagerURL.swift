import FoundationEssentials

/// The base URL of an identity manager: scheme, host, optional port and path. No user info, query or fragment.
///
/// Parsed by hand so that what is checked is exactly what libcurl is given.
public struct ManagerURL: Hashable, Sendable, CustomStringConvertible, Codable {
    public enum Scheme: String, Sendable { case http, https }

    public let scheme: Scheme
    /// Lower-cased host; IPv6 literals keep their brackets.
    public let host: String
    public let port: Int?
    /// Empty, or starting with "/" and without a trailing "/".
    public let path: String

    public static let maximumLength = 256

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public init(_ text: String) throws {
        func fail(_ why: String) -> ParseError { ParseError(description: "manager URL '\(text.prefix(80))' \(why)") }
        guard text.utf8.count <= Self.maximumLength else {
            throw fail("is longer than \(Self.maximumLength) characters")
        }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw fail("contains spaces or non-ASCII characters")
        }
        guard let schemeEnd = text.firstRange(of: "://") else {
            throw fail("must start with https:// (or http:// for loopback)")
        }
        guard let scheme = Scheme(rawValue: text[..<schemeEnd.lowerBound].lowercased()) else {
            throw fail("must use https:// (or http:// for loopback)")
        }
        let rest = text[schemeEnd.upperBound...]
        guard !rest.contains("?"), !rest.contains("#") else { throw fail("must not have a query or fragment") }
        let authorityEnd = rest.firstIndex(of: "/") ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        guard !authority.contains("@") else { throw fail("must not contain user information") }
        var host = Substring(authority)
        var port: Int?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else { throw fail("has an unterminated IPv6 address") }
            host = authority[...close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw fail("has characters after the IPv6 address") }
                port = try Self.port(after.dropFirst(), fail)
            }
            guard host.dropFirst().dropLast().allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else {
                throw fail("has an invalid IPv6 address")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            host = authority[..<colon]
            port = try Self.port(authority[authority.index(after: colon)...], fail)
        }
        guard !host.isEmpty else { throw fail("has no host") }
        if !host.hasPrefix("[") {
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-") }) else {
                throw fail("has an invalid host name")
            }
        }
        var path = String(rest[authorityEnd...])
        while path.hasSuffix("/") { path.removeLast() }
        guard !path.contains("//"), !path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." }) else {
            throw fail("has an unusual path")
        }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = port
        self.path = path
    }

    private static func port(_ text: Substring, _ fail: (String) -> ParseError) throws -> Int {
        guard !text.isEmpty, text.count <= 5, text.allSatisfy(\.isASCII), let value = Int(text),
            (1...65535).contains(value)
        else {
            throw fail("has an invalid port")
        }
        return value
    }

    private init(scheme: Scheme, host: String, port: Int?, path: String) {
        self.scheme = scheme
        self.host = host
        self.port = port
        self.path = path
    }

    /// http://127.0.0.1:8440, the manager's default address.
    public static let localDefault = ManagerURL(scheme: .http, host: "127.0.0.1", port: 8440, path: "")

    public var description: String {
        "\(scheme.rawValue)://\(host)\(port.map { ":\($0)" } ?? "")\(path)"
    }

    /// `scheme://host[:port]` as a browser writes an origin (the scheme's default port left out): what WebAuthn binds.
    public var origin: String {
        let defaultPort = scheme == .https ? 443 : 80
        return "\(scheme.rawValue)://\(host)" + (port.flatMap { $0 == defaultPort ? nil : ":\($0)" } ?? "")
    }

    /// The URL of an API path such as "/v1/registrations".
    public func endpoint(_ apiPath: String) -> String { description + apiPath }

    /// 127.0.0.0/8, ::1 and "localhost": the only hosts plain http is allowed to.
    public var isLoopback: Bool { Self.isLoopback(host: host) }

    /// The same rule for a host name or address, IPv6 with or without brackets.
    public static func isLoopback(host: String) -> Bool {
        if host == "localhost" || host == "[::1]" || host == "::1" { return true }
        let octets = host.split(separator: ".", omittingEmptySubsequences: false)
        return octets.count == 4 && octets[0] == "127" && octets.allSatisfy { UInt8($0) != nil }
    }

    /// Nevis's server-override rule: scheme, host and port come from `override`; the path stays ours.
    public func overriding(with override: ManagerURL) -> ManagerURL {
        ManagerURL(scheme: override.scheme, host: override.host, port: override.port, path: path)
    }

    /// docs/design.md, invariant 1: https everywhere, plain http only to loopback.
    public func checkTransportPolicy() throws {
        if scheme == .http && !isLoopback {
            throw ParseError(
                description: "manager URL \(self) uses plain http to a host that is not loopback; use https://")
        }
    }

    public init(from decoder: any Decoder) throws {
        let text = try decoder.singleValueContainer().decode(String.self)
        try self.init(text)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(description)
    }
}

extension ManagerURL {
    /// The URL with scheme and host in upper case (both are case-insensitive): QR alphanumeric mode holds it,
    /// up to a path, which keeps its case.
    public var upperCased: String {
        "\(scheme.rawValue.uppercased())://\(host.uppercased())" + (port.map { ":\($0)" } ?? "") + path
    }
}
