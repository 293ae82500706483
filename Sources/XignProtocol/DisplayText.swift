/// Text from the manager (or anyone it relays) made safe for a terminal or a PAM conversation.
///
/// A terminal obeys escape sequences in what it prints: a hostile alias could move the cursor, retitle the
/// window, or hide the real question. Control characters, escape sequences (ESC and their 8-bit C1 forms,
/// which some terminals still obey) and the bidirectional overrides that reorder what is shown are removed,
/// sequence and all; everything else is kept.
public enum DisplayText {
    /// `text` without control characters or escape sequences. Line feeds stay when `keepingLineFeeds` (the
    /// confirmation text is several lines); a tab becomes a space.
    public static func sanitized(_ text: String, keepingLineFeeds: Bool = true) -> String {
        var result = String.UnicodeScalarView()
        var scalars = text.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            switch scalar.value {
            case 0x0A where keepingLineFeeds:
                result.append(scalar)
            case 0x09:
                result.append(" ")
            case 0x1B:
                skipEscapeSequence(&scalars)
            case 0x9B:
                skipControlSequence(&scalars)
            case 0x90, 0x98, 0x9D, 0x9E, 0x9F:
                skipControlString(&scalars)
            default:
                if isSafe(scalar) { result.append(scalar) }
            }
        }
        return String(result)
    }

    /// `text` with every character that may not be shown as it is (a control, a bidirectional control, NUL) replaced
    /// by U+FFFD, so that a page shows that something was there without obeying it.
    public static func marked(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { isSafe($0) ? $0 : "\u{FFFD}" }))
    }

    /// Whether `scalar` may be shown as it is: not a C0 or C1 control, DEL, or a bidirectional control.
    public static func isSafe(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x00...0x1F, 0x7F...0x9F: false
        // LRM, RLM, ALM, the embeddings and overrides, and the isolates.
        case 0x200E, 0x200F, 0x061C, 0x202A...0x202E, 0x2066...0x2069: false
        default: true
        }
    }

    /// Whether every scalar of `text` is safe and it is one line: what the manager accepts in names it shows.
    public static func isSafeLine(_ text: String) -> Bool {
        text.unicodeScalars.allSatisfy(isSafe)
    }

    /// `isSafeLine`, and at most `maximumLength` Unicode scalars: JSON Schema's maxLength counts them so.
    public static func isSafeLine(_ text: String, maximumLength: Int) -> Bool {
        var count = 0
        for scalar in text.unicodeScalars {
            count += 1
            guard count <= maximumLength, isSafe(scalar) else { return false }
        }
        return true
    }

    /// After ESC: CSI (`[`), a control string (`]` OSC, `P` DCS, `X` SOS, `^` PM, `_` APC), or intermediates
    /// and one final byte.
    private static func skipEscapeSequence(_ scalars: inout String.UnicodeScalarView.Iterator) {
        guard let next = scalars.next() else { return }
        switch next {
        case "[": skipControlSequence(&scalars)
        case "]", "P", "X", "^", "_": skipControlString(&scalars)
        default:
            var current = next
            // Intermediates (0x20–0x2F) until the final byte.
            while (0x20...0x2F).contains(current.value), let following = scalars.next() { current = following }
        }
    }

    /// CSI's parameters and intermediates (0x20–0x3F) up to its final byte (0x40–0x7E), or anything else that ends it.
    private static func skipControlSequence(_ scalars: inout String.UnicodeScalarView.Iterator) {
        while let scalar = scalars.next(), (0x20...0x3F).contains(scalar.value) {}
    }

    /// A control string runs to BEL, ST (ESC `\` or 0x9C), or the end of the text.
    private static func skipControlString(_ scalars: inout String.UnicodeScalarView.Iterator) {
        while let scalar = scalars.next() {
            switch scalar.value {
            case 0x07, 0x9C: return
            case 0x1B:
                _ = scalars.next()
                return
            default: continue
            }
        }
    }
}
