import FoundationEssentials

/// PinValidator.ResultCode from the SDKs, with OneWelcome's policy codes added.
public enum PinValidationResult: String, Codable, Sendable, CaseIterable {
    case valid, empty, onlyNumbers, tooShort, tooLong
    case blacklisted, sequence, similarDigits
    /// A character outside printable ASCII: a login screen or console with another keyboard layout could not type it.
    case unsupportedCharacter
}

extension PinPolicyMessage {
    public func validate(_ pin: String) -> PinValidationResult {
        if pin.isEmpty { return .empty }
        // Length limit before any other work: the PIN is user input.
        let length = pin.unicodeScalars.count
        if length > maxLength { return .tooLong }
        if digitsOnly && !pin.unicodeScalars.allSatisfy({ ("0"..."9").contains($0) }) { return .onlyNumbers }
        if !pin.unicodeScalars.allSatisfy({ (0x20...0x7E).contains($0.value) }) { return .unsupportedCharacter }
        if length < minLength { return .tooShort }
        if blacklist.contains(pin) { return .blacklisted }
        let digits = pin.unicodeScalars.map { Int($0.value) }
        if longestRun(digits, step: 1) > maxSequenceLength || longestRun(digits, step: -1) > maxSequenceLength {
            return .sequence
        }
        if longestRun(digits, step: 0) > maxSimilarDigits { return .similarDigits }
        return .valid
    }

    /// The longest run where each element is the previous plus `step`.
    private func longestRun(_ values: [Int], step: Int) -> Int {
        var longest = values.isEmpty ? 0 : 1
        var current = 1
        for index in values.indices.dropFirst() {
            current = values[index] == values[index - 1] + step ? current + 1 : 1
            longest = max(longest, current)
        }
        return longest
    }
}

/// AliasValidator.ResultCode from the SDKs, and `invalid` for control characters (an alias is shown in prompts).
public enum AliasValidationResult: String, Codable, Sendable, CaseIterable {
    case valid, empty, tooShort, tooLong, invalid
}

extension AliasPolicyMessage {
    public func validate(_ alias: String) -> AliasValidationResult {
        if alias.trimmed.isEmpty { return .empty }
        // Scalars, as JSON Schema's maxLength counts them (docs/openapi.yaml).
        let length = alias.unicodeScalars.count
        if length > maxLength { return .tooLong }
        if length < minLength { return .tooShort }
        if !DisplayText.isSafeLine(alias) { return .invalid }
        return .valid
    }
}

/// EmailValidator.ResultCode from the SDKs.
public enum EmailValidationResult: String, Codable, Sendable, CaseIterable {
    case valid, empty, invalid
}

public enum EmailValidator {
    public static let maximumLength = 254

    /// A deliberately plain check: one "@", a dotted domain, no spaces or control characters.
    public static func validate(_ email: String) -> EmailValidationResult {
        if email.isEmpty { return .empty }
        guard email.utf8.count <= maximumLength,
            email.unicodeScalars.allSatisfy({ $0 != " " && DisplayText.isSafe($0) })
        else {
            return .invalid
        }
        let parts = email.split(separator: "@", omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, parts[0].utf8.count <= 64 else { return .invalid }
        let labels = parts[1].split(separator: ".", omittingEmptySubsequences: false)
        guard labels.count >= 2, labels.allSatisfy({ !$0.isEmpty && !$0.hasPrefix("-") && !$0.hasSuffix("-") }) else {
            return .invalid
        }
        return .valid
    }
}

/// Free-text attributes (names, places): bounded, printable (no control or bidirectional characters), single line.
public enum TextAttributeValidator {
    public static let maximumLength = 128

    public static func validate(_ value: String) -> EmailValidationResult {
        if value.trimmed.isEmpty { return .empty }
        return DisplayText.isSafeLine(value, maximumLength: maximumLength) ? .valid : .invalid
    }
}

/// What machines name things with (ids, services, roles, categories): printable ASCII without spaces, so its
/// length in bytes is its length in characters. docs/openapi.yaml's `Identifier` patterns say the same.
public enum IdentifierValidator {
    public static func isValid(_ text: some StringProtocol, length: ClosedRange<Int> = 1...64) -> Bool {
        length.contains(text.utf8.count) && text.utf8.allSatisfy { (0x21...0x7E).contains($0) }
    }
}

/// A local login name as Debian's adduser accepts it by default: a lower-case letter or `_`, then lower-case
/// letters, digits, `_`, `-` or `.`, at most 32 characters. Hosts map it to the account that may log in.
public enum LoginNameValidator {
    public static func validate(_ name: String) -> EmailValidationResult {
        if name.isEmpty { return .empty }
        let bytes = Array(name.utf8)
        guard bytes.count <= 32, let first = bytes.first,
            first == UInt8(ascii: "_") || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(first)
        else {
            return .invalid
        }
        let allowed = bytes.allSatisfy { byte in
            (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-") || byte == UInt8(ascii: ".")
        }
        return allowed ? .valid : .invalid
    }
}

/// The check for an attribute's value by its name: email and loginName have their own rules, the rest are text.
public enum AttributeValidator {
    public static let loginName = "loginName"

    public static func validate(name: String, value: String) -> EmailValidationResult {
        switch name {
        case "email": return EmailValidator.validate(value)
        case loginName: return LoginNameValidator.validate(value)
        default: return TextAttributeValidator.validate(value)
        }
    }
}

/// Host names as an administrator writes them: DNS-like, so they read well in a prompt and a log line.
public enum HostNameValidator {
    public static func isValid(_ name: String) -> Bool {
        (1...WireLimit.hostName).contains(name.utf8.count)
            && name.utf8.allSatisfy { byte in
                switch byte {
                case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                    UInt8(ascii: "0")...UInt8(ascii: "9"),
                    UInt8(ascii: "."), UInt8(ascii: "-"):
                    return true
                default:
                    return false
                }
            } && !name.hasPrefix("-") && !name.hasPrefix(".")
    }
}
