import CQREncode
import FoundationEssentials

/// A QR code as a square of modules, encoded by libqrencode at error-correction level M.
public struct QRCode: Equatable, Sendable {
    /// Modules per side, without the quiet zone.
    public let size: Int
    /// Row-major; true is a dark module.
    public let modules: [Bool]

    /// ISO/IEC 18004 asks for four light modules around the symbol.
    public static let quietZone = 4
    public static let maximumPayloadBytes = 2048

    public struct EncodingError: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// Error correction: M (15 %) by default; L (7 %) holds a third more, and a terminal draws modules cleanly.
    public enum Level: Sendable { case low, medium }

    public init(encoding payload: String, level: Level = .medium) throws {
        let bytes = Array(payload.utf8)
        guard !bytes.isEmpty else { throw EncodingError(description: "nothing to encode: the payload is empty") }
        guard bytes.count <= Self.maximumPayloadBytes else {
            throw EncodingError(
                description:
                    "the payload is \(bytes.count) bytes; a QR code here holds at most \(Self.maximumPayloadBytes)")
        }
        // Text without NUL goes through libqrencode's mode optimizer, so upper-case payloads use alphanumeric mode.
        let correction = level == .low ? QR_ECLEVEL_L : QR_ECLEVEL_M
        let encoded =
            bytes.contains(0)
            ? QRcode_encodeData(Int32(bytes.count), bytes, 0, correction)
            : QRcode_encodeString(payload, 0, correction, QR_MODE_8, 1)
        guard let code = encoded else {
            throw EncodingError(
                description: "libqrencode could not encode the payload (it may contain bytes QR mode 8-bit cannot hold)"
            )
        }
        defer { QRcode_free(code) }
        let width = Int(code.pointee.width)
        size = width
        modules = (0..<(width * width)).map { code.pointee.data[$0] & 1 == 1 }
    }

    /// The module at (x, y), where coordinates include the quiet zone; outside the symbol is light.
    public func isDark(x: Int, y: Int) -> Bool {
        let mx = x - Self.quietZone, my = y - Self.quietZone
        guard mx >= 0, my >= 0, mx < size, my < size else { return false }
        return modules[my * size + mx]
    }

    /// Side length in modules, quiet zone included.
    public var paddedSize: Int { size + 2 * Self.quietZone }
}
