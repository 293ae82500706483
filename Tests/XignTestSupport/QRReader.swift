import Foundation

/// Reads back what a terminal shows: half-block text to a bitmap, to PNG, decoded by zbarimg.
/// Written independently of the renderer, so a rendering bug cannot hide behind a shared helper.
public enum QRReader {
    /// Maps rendered text (any of the three styles) to rows of dark (true) and light pixels.
    public static func bitmap(fromTerminalText text: String, inverted: Bool = false) throws -> [[Bool]] {
        var rows: [[Bool]] = []
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) where !line.isEmpty {
            var top: [Bool] = [], bottom: [Bool] = []
            if line.contains("\u{1B}[") {
                // ANSI: ESC[<fg>;<bg>m▀ per cell; 30 = black ink, 97 = white; 40 black, 107 white.
                let cells = line.components(separatedBy: "\u{1B}[").dropFirst()
                for cell in cells {
                    guard let m = cell.firstIndex(of: "m") else { throw TestFailure("malformed ANSI cell '\(cell)'") }
                    let codes = cell[..<m].split(separator: ";").compactMap { Int($0) }
                    if codes == [0] { continue }
                    guard codes.count == 2, cell[cell.index(after: m)...] == "\u{2580}" else {
                        throw TestFailure("unexpected ANSI cell '\(cell)'")
                    }
                    top.append(codes[0] == 30)
                    bottom.append(codes[1] == 40)
                }
            } else {
                for character in line {
                    let (upper, lower): (Bool, Bool)
                    switch character {
                    case "\u{2588}": (upper, lower) = (true, true)
                    case "\u{2580}": (upper, lower) = (true, false)
                    case "\u{2584}": (upper, lower) = (false, true)
                    case " ": (upper, lower) = (false, false)
                    default:
                        throw TestFailure(
                            "unexpected character U+\(String(character.unicodeScalars.first!.value, radix: 16)) in QR text"
                        )
                    }
                    // Inverted style draws light modules as ink.
                    top.append(inverted ? !upper : upper)
                    bottom.append(inverted ? !lower : lower)
                }
            }
            rows.append(top)
            rows.append(bottom)
        }
        return rows
    }

    /// Writes the bitmap as a PGM (which zbarimg reads) with `scale` pixels per module and decodes it.
    public static func decode(bitmap: [[Bool]], scale: Int = 6, in directory: TemporaryDirectory) throws -> String {
        guard let width = bitmap.first?.count, bitmap.allSatisfy({ $0.count == width }) else {
            throw TestFailure("ragged QR bitmap")
        }
        var pgm = Array("P5\n\(width * scale) \(bitmap.count * scale)\n255\n".utf8)
        for row in bitmap {
            let line = row.flatMap { [UInt8](repeating: $0 ? 0 : 255, count: scale) }
            for _ in 0..<scale { pgm += line }
        }
        let path = directory.file("qr-\(UUID().uuidString).pgm")
        try writeTestFile(path, Data(pgm))
        return try zbarimg(path, in: directory)
    }

    /// zbarimg's reading of an image file, exactly (no trailing newline).
    public static func zbarimg(_ imagePath: String, in directory: TemporaryDirectory) throws -> String {
        let result = try ChildProcess("/usr/bin/zbarimg", ["--nodbus", "--raw", "-q", imagePath], in: directory).wait()
        guard result.status == 0 else {
            throw TestFailure("zbarimg found no code (status \(result.status)): \(result.stderr)")
        }
        var text = result.stdout
        if text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
