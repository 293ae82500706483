import FoundationEssentials

/// A minimal PNG encoder for QR codes: 8-bit greyscale, zlib "stored" blocks (no compression needed
/// for a few kilobytes), so `--png` needs no image library.
public enum PNGWriter {
    /// A QR code with its quiet zone, `scale` pixels per module.
    public static func png(for code: QRCode, scale: Int = 8) -> Data {
        let side = code.paddedSize * scale
        var pixels = [UInt8](repeating: 255, count: side * side)
        for y in 0..<side {
            for x in 0..<side where code.isDark(x: x / scale, y: y / scale) {
                pixels[y * side + x] = 0
            }
        }
        return png(width: side, height: side, greyscale: pixels)
    }

    /// `pixels` holds width × height bytes; png(for:) builds it so.
    static func png(width: Int, height: Int, greyscale pixels: [UInt8]) -> Data {
        var raw: [UInt8] = []
        raw.reserveCapacity((width + 1) * height)
        for row in 0..<height {
            raw.append(0)  // filter: none
            raw += pixels[(row * width)..<((row + 1) * width)]
        }
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        var header: [UInt8] = []
        header += bigEndian(UInt32(width)) + bigEndian(UInt32(height))
        header += [8, 0, 0, 0, 0]  // bit depth 8, greyscale, deflate, adaptive filter, no interlace
        chunk("IHDR", header, into: &out)
        chunk("IDAT", zlibStored(raw), into: &out)
        chunk("IEND", [], into: &out)
        return Data(out)
    }

    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var offset = 0
        repeat {
            let length = min(65535, data.count - offset)
            let last: UInt8 = offset + length == data.count ? 1 : 0
            out.append(last)
            out += [UInt8(length & 0xFF), UInt8(length >> 8), UInt8(~length & 0xFF), UInt8((~length >> 8) & 0xFF)]
            out += data[offset..<(offset + length)]
            offset += length
        } while offset < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for byte in data {
            a = (a + UInt32(byte)) % 65521
            b = (b + a) % 65521
        }
        return out + bigEndian((b << 16) | a)
    }

    static func chunk(_ type: String, _ body: [UInt8], into out: inout [UInt8]) {
        let typed = Array(type.utf8) + body
        out += bigEndian(UInt32(body.count)) + typed + bigEndian(crc32(typed))
    }

    static let crcTable: [UInt32] = (0..<256).map { n in
        var c = UInt32(n)
        for _ in 0..<8 { c = c & 1 != 0 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
        return c
    }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var c: UInt32 = 0xFFFF_FFFF
        for byte in bytes { c = crcTable[Int((c ^ UInt32(byte)) & 0xFF)] ^ (c >> 8) }
        return c ^ 0xFFFF_FFFF
    }

    static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8((value >> 16) & 0xFF), UInt8((value >> 8) & 0xFF), UInt8(value & 0xFF)]
    }
}
