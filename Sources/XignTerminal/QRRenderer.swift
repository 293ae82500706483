import FoundationEssentials

/// Draws a QR code for a terminal: one character per module across, two modules per line down (half blocks).
public enum QRStyle: String, CaseIterable, Sendable {
    /// Dark modules drawn in the text colour: for dark text on a light background.
    case utf8
    /// Light modules drawn in the text colour: for light text on a dark background.
    case utf8Inverted = "utf8-inverted"
    /// Explicit black and white ANSI colours: right on any background, needs a colour terminal.
    case ansi
}

public enum QRRenderer {
    public struct TooWide: Error, Equatable, CustomStringConvertible {
        public let needed: Int
        public let available: Int
        public init(needed: Int, available: Int) {
            self.needed = needed
            self.available = available
        }
        public var description: String {
            "the QR code needs \(needed) columns but the terminal has \(available); widen the window, or use --png FILE to save it as an image"
        }
    }

    public struct TooTall: Error, Equatable, CustomStringConvertible {
        public let needed: Int
        public let available: Int
        public init(needed: Int, available: Int) {
            self.needed = needed
            self.available = available
        }
        public var description: String {
            "the QR code and its text need \(needed) lines but the terminal has \(available), so its top would scroll away; enlarge the window, or use --png FILE to save it as an image"
        }
    }

    static let upper = "\u{2580}", lower = "\u{2584}", full = "\u{2588}"

    /// Terminal lines the code takes: two modules a line, quiet zone included.
    public static func lines(for code: QRCode) -> Int { (code.paddedSize + 1) / 2 }

    /// The text to print, lines ending in "\n". Throws if it is wider than `columns`, or if it and `besideLines`
    /// lines of text are taller than `rows` (a code whose top scrolls away cannot be scanned).
    public static func render(
        _ code: QRCode, style: QRStyle, columns: Int, rows: Int? = nil, besideLines: Int = 0
    ) throws -> String {
        let side = code.paddedSize
        guard side <= columns else { throw TooWide(needed: side, available: columns) }
        if let rows, lines(for: code) + besideLines > rows {
            throw TooTall(needed: lines(for: code) + besideLines, available: rows)
        }
        var out = ""
        for y in stride(from: 0, to: side, by: 2) {
            for x in 0..<side {
                // The side is odd, so the last line's lower half lies outside the symbol; isDark calls it light,
                // which extends the quiet zone there in every style.
                let top = code.isDark(x: x, y: y)
                let bottom = code.isDark(x: x, y: y + 1)
                switch style {
                case .utf8: out += glyph(top: top, bottom: bottom)
                case .utf8Inverted: out += glyph(top: !top, bottom: !bottom)
                case .ansi:
                    // Foreground paints the upper half, background the lower half.
                    out += "\u{1B}[\(top ? 30 : 97);\(bottom ? 40 : 107)m" + upper
                }
            }
            out += style == .ansi ? "\u{1B}[0m\n" : "\n"
        }
        return out
    }

    /// Draws `payload` at level M, or at level L where only that fits; throws what stops the level L code.
    public static func render(
        _ payload: String, style: QRStyle, columns: Int, rows: Int? = nil, besideLines: Int = 0
    ) throws -> String {
        do {
            return try render(
                try QRCode(encoding: payload), style: style, columns: columns, rows: rows, besideLines: besideLines)
        } catch is TooTall {
        } catch is TooWide {
        }
        return try render(
            try QRCode(encoding: payload, level: .low), style: style, columns: columns, rows: rows,
            besideLines: besideLines)
    }

    static func glyph(top: Bool, bottom: Bool) -> String {
        switch (top, bottom) {
        case (true, true): return full
        case (true, false): return upper
        case (false, true): return lower
        case (false, false): return " "
        }
    }
}
