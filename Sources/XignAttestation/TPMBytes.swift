import FoundationEssentials

/// Why a TPM structure or an attestation was refused; `description` names what is wrong.
public struct AttestationError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Reads the TPM's big-endian marshalling (TPM 2.0 Part 2), refusing anything short.
struct TPMReader {
    private var bytes: Data.SubSequence
    private let what: String

    init(_ data: Data, what: String) {
        bytes = data[...]
        self.what = what
    }

    mutating func bytes(_ count: Int) throws -> Data {
        guard count >= 0, bytes.count >= count else { throw AttestationError("\(what) is truncated") }
        let out = Data(bytes.prefix(count))
        bytes = bytes.dropFirst(count)
        return out
    }

    mutating func uint16() throws -> UInt16 { try bytes(2).reduce(0) { $0 << 8 | UInt16($1) } }
    mutating func uint32() throws -> UInt32 { try bytes(4).reduce(0) { $0 << 8 | UInt32($1) } }
    /// A TPM2B: a 16-bit size, then that many bytes.
    mutating func sized() throws -> Data { try bytes(Int(try uint16())) }

    func expectEnd() throws {
        guard bytes.isEmpty else { throw AttestationError("\(what) has trailing bytes") }
    }
}

/// Writes the TPM's big-endian marshalling.
struct TPMWriter {
    private(set) var data = Data()

    private mutating func uint16(_ value: Int) { data += [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }
    /// A TPM2B of `bytes`.
    mutating func sized(_ bytes: Data) {
        uint16(bytes.count)
        data += bytes
    }

    static func sized(_ bytes: Data) -> Data {
        var writer = TPMWriter()
        writer.sized(bytes)
        return writer.data
    }
}
