/// Text from a caller or the network made safe for one log line.
///
/// journald splits a service's output into entries at LF and at NUL, and reads `<N>` at the start of each as the
/// entry's priority; a terminal reading the log obeys escapes. So a field keeps no control character (NUL, LF and
/// ESC included), no escape sequence and no bidirectional control, and is cut at `maximumLength` scalars.
public enum LogText {
    public static let maximumFieldLength = 256

    public static func field(_ text: String, maximumLength: Int = maximumFieldLength) -> String {
        let clean = DisplayText.sanitized(text, keepingLineFeeds: false)
        guard clean.unicodeScalars.count > maximumLength else { return clean }
        return String(String.UnicodeScalarView(clean.unicodeScalars.prefix(maximumLength))) + "…"
    }

    /// A whole line: its fields were made safe already, and this is the last guard before it is written.
    public static func line(_ text: String) -> String { field(text, maximumLength: 4096) }
}
