import FoundationEssentials

/// The part of CBOR (RFC 8949) that WebAuthn's attestation objects and COSE keys use: unsigned and negative integers,
/// byte and text strings, arrays, maps, booleans and null, all of definite length. Anything else (floats, tags,
/// indefinite lengths) is refused, and so is any length past what the input holds or past the limits below.
public indirect enum CBORValue: Equatable, Sendable {
    case unsigned(UInt64)
    case negative(Int64)
    case bytes(Data)
    case text(String)
    case array([CBORValue])
    case map([CBORPair])
    case bool(Bool)
    case null

    /// The value of `key` in a map, or nil (also when this is no map).
    public subscript(key: CBORValue) -> CBORValue? {
        guard case .map(let pairs) = self else { return nil }
        return pairs.first { $0.key == key }?.value
    }

    public var integer: Int64? {
        switch self {
        case .unsigned(let value): value <= UInt64(Int64.max) ? Int64(value) : nil
        case .negative(let value): value
        default: nil
        }
    }
}

public struct CBORPair: Equatable, Sendable {
    public let key: CBORValue
    public let value: CBORValue
}

/// Reads one CBOR item from the front of its input.
public struct CBORReader {
    /// Nesting beyond this is refused: a COSE key inside attested credential data needs 2.
    public static let maximumDepth = 8
    /// Items in one array or map.
    public static let maximumItems = 64

    private let bytes: [UInt8]
    /// Where the next item starts.
    public private(set) var offset = 0

    public init(_ data: Data) { bytes = [UInt8](data) }

    /// The first item; `offset` then says how many bytes it took.
    public mutating func read() throws(WebAuthnError) -> CBORValue { try item(depth: 0) }

    /// The whole input as exactly one item.
    public static func decode(_ data: Data) throws(WebAuthnError) -> CBORValue {
        var reader = CBORReader(data)
        let value = try reader.read()
        guard reader.offset == reader.bytes.count else {
            throw WebAuthnError.malformed("CBOR has bytes after its item")
        }
        return value
    }

    private mutating func byte() throws(WebAuthnError) -> UInt8 {
        guard offset < bytes.count else { throw WebAuthnError.malformed("CBOR ends inside an item") }
        defer { offset += 1 }
        return bytes[offset]
    }

    private mutating func argument(_ additional: UInt8) throws(WebAuthnError) -> UInt64 {
        switch additional {
        case 0..<24: return UInt64(additional)
        case 24...27:
            var value: UInt64 = 0
            for _ in 0..<(1 << (additional - 24)) { value = value << 8 | UInt64(try byte()) }
            return value
        default: throw WebAuthnError.malformed("CBOR with indefinite or reserved lengths is not accepted")
        }
    }

    private mutating func take(_ count: UInt64) throws(WebAuthnError) -> ArraySlice<UInt8> {
        guard count <= UInt64(bytes.count - offset) else {
            throw WebAuthnError.malformed("a CBOR string is longer than its input")
        }
        let end = offset + Int(count)
        defer { offset = end }
        return bytes[offset..<end]
    }

    private mutating func item(depth: Int) throws(WebAuthnError) -> CBORValue {
        guard depth <= Self.maximumDepth else { throw WebAuthnError.malformed("CBOR is nested too deeply") }
        let initial = try byte()
        let additional = initial & 0x1f
        switch initial >> 5 {
        case 0: return .unsigned(try argument(additional))
        case 1:
            let value = try argument(additional)
            guard value <= UInt64(Int64.max) else {
                throw WebAuthnError.malformed("a CBOR negative integer is out of range")
            }
            return .negative(-1 - Int64(value))
        case 2: return .bytes(Data(try take(try argument(additional))))
        case 3:
            guard let text = String(validating: try take(try argument(additional)), as: UTF8.self) else {
                throw WebAuthnError.malformed("a CBOR text string is not UTF-8")
            }
            return .text(text)
        case 4:
            let count = try argument(additional)
            guard count <= UInt64(Self.maximumItems) else {
                throw WebAuthnError.malformed("a CBOR array has too many items")
            }
            var items: [CBORValue] = []
            for _ in 0..<count { items.append(try item(depth: depth + 1)) }
            return .array(items)
        case 5:
            let count = try argument(additional)
            guard count <= UInt64(Self.maximumItems) else {
                throw WebAuthnError.malformed("a CBOR map has too many entries")
            }
            var pairs: [CBORPair] = []
            for _ in 0..<count {
                let key = try item(depth: depth + 1)
                guard !pairs.contains(where: { $0.key == key }) else {
                    throw WebAuthnError.malformed("a CBOR map repeats a key")
                }
                pairs.append(CBORPair(key: key, value: try item(depth: depth + 1)))
            }
            return .map(pairs)
        case 7:
            switch additional {
            case 20: return .bool(false)
            case 21: return .bool(true)
            case 22: return .null
            default:
                throw WebAuthnError.malformed(
                    "CBOR floats and simple values other than true, false and null are not accepted")
            }
        default: throw WebAuthnError.malformed("CBOR tags are not accepted")
        }
    }
}
