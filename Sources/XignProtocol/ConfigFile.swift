import FoundationEssentials

/// The `key = value` format of /etc/xign/xign.conf and the manager's config, with `[section]` headers.
///
/// Strict on purpose: an unknown key, a repeated key or a bad value is an error that names the line,
/// because a silently ignored typo in a login system's config is a security bug.
public struct ConfigFile: Sendable {
    public struct Entry: Sendable {
        public var value: String
        public var line: Int
    }

    public struct ParseError: Error, Equatable, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    public static let maximumSize = 64 * 1024
    public static let maximumLineLength = 4096

    /// The source's name in messages, usually its path.
    public let source: String
    /// Keys are "section.key"; keys before any section have no prefix.
    public private(set) var entries: [String: Entry] = [:]

    public init(text: String, source: String) throws {
        self.source = source
        func fail(_ line: Int, _ why: String) -> ParseError { ParseError(description: "\(source):\(line): \(why)") }
        guard text.utf8.count <= Self.maximumSize else {
            throw ParseError(description: "\(source): larger than \(Self.maximumSize) bytes; is this the right file?")
        }
        var section = ""
        for (offset, rawLine) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let number = offset + 1
            guard rawLine.utf8.count <= Self.maximumLineLength else {
                throw fail(number, "line is longer than \(Self.maximumLineLength) bytes")
            }
            let line = rawLine.trimmed
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if line.hasPrefix("[") {
                guard line.hasSuffix("]"), line.count > 2 else {
                    throw fail(number, "a section header looks like [name]")
                }
                section = String(line.dropFirst().dropLast()).trimmed
                guard Self.isName(section) else { throw fail(number, "'\(section)' is not a valid section name") }
                continue
            }
            guard let equals = line.firstIndex(of: "=") else { throw fail(number, "expected key = value") }
            let key = line[..<equals].trimmed
            let value = line[line.index(after: equals)...].trimmed
            guard Self.isName(key) else { throw fail(number, "'\(key.prefix(40))' is not a valid key") }
            let fullKey = section.isEmpty ? key : section + "." + key
            if let previous = entries[fullKey] {
                throw fail(number, "\(fullKey) is already set on line \(previous.line)")
            }
            entries[fullKey] = Entry(value: Self.unquoted(value), line: number)
        }
    }

    private static func isName(_ text: String) -> Bool {
        !text.isEmpty && text.count <= 64
            && text.unicodeScalars.allSatisfy {
                ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0) || $0 == "_"
                    || $0 == "-" || $0 == "."
            }
    }

    private static func unquoted(_ value: String) -> String {
        if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") {
            return String(value.dropFirst().dropLast())
        }
        return value
    }

    /// Throws for keys outside `known`; call it once with every key the reader understands.
    public func rejectUnknownKeys(_ known: Set<String>, prefixes: [String] = []) throws {
        for (key, entry) in entries.sorted(by: { $0.value.line < $1.value.line })
        where !known.contains(key) && !prefixes.contains(where: { key.hasPrefix($0) }) {
            throw ParseError(description: "\(source):\(entry.line): unknown setting '\(key)'")
        }
    }

    public func string(_ key: String) -> String? { entries[key]?.value }

    /// The error for `key`, naming the file and the key's line.
    public func fail(_ key: String, _ why: String) -> ParseError {
        ParseError(description: "\(source):\(entries[key]?.line ?? 0): \(key) \(why)")
    }

    public func bool(_ key: String) throws -> Bool? {
        guard let value = string(key) else { return nil }
        switch value.lowercased() {
        case "true", "yes", "on", "1": return true
        case "false", "no", "off", "0": return false
        default: throw fail(key, "must be true or false, not '\(value.prefix(20))'")
        }
    }

    public func integer(_ key: String, in range: ClosedRange<Int>) throws -> Int? {
        guard let value = string(key) else { return nil }
        guard let number = Int(value), range.contains(number) else {
            throw fail(key, "must be a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// "250ms", "30s", "5m", "2h", "7d" or a bare number of seconds, in milliseconds; nil when it is none of these.
    public static func milliseconds(_ value: String) -> Int64? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (suffix, factor) in units where value.hasSuffix(suffix) {
            guard let number = Int64(value.dropLast(suffix.count)), number >= 0, number <= Int64.max / factor else {
                return nil
            }
            return number * factor
        }
        guard let seconds = Int64(value), seconds >= 0, seconds <= Int64.max / 1000 else { return nil }
        return seconds * 1000
    }

    /// A duration (see `milliseconds(_:)`) within `range`, in milliseconds.
    public func milliseconds(_ key: String, in range: ClosedRange<Int64>) throws -> Int64? {
        guard let value = string(key) else { return nil }
        guard let result = Self.milliseconds(value), range.contains(result) else {
            throw fail(
                key,
                "must be a duration such as 250ms, 30s or 5m, from \(range.lowerBound) ms to \(range.upperBound) ms")
        }
        return result
    }

    /// A comma-separated list; empty items are dropped.
    public func list(_ key: String) -> [String]? {
        string(key).map { $0.split(separator: ",").map { $0.trimmed }.filter { !$0.isEmpty } }
    }
}
