import FoundationEssentials
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Prompts on the controlling terminal. Prompts go to stderr so stdout stays clean for `--json`.
public enum Terminal {
    public struct InputError: Error, Equatable, CustomStringConvertible {
        public let description: String
        public init(_ description: String) { self.description = description }
    }

    public static let maximumLineLength = 1024

    /// The width of the terminal on stdout, or nil when stdout is not a terminal.
    public static func columns() -> Int? { size().map(\.columns) }

    /// The height of the terminal on stdout, or nil when stdout is not a terminal.
    public static func rows() -> Int? { size().map(\.rows) }

    private static func size() -> (columns: Int, rows: Int)? {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0, size.ws_row > 0 else { return nil }
        return (Int(size.ws_col), Int(size.ws_row))
    }

    public static var isInteractive: Bool { isatty(STDIN_FILENO) == 1 }

    /// Writes `text` without control characters or escape sequences (DisplayText): messages quote the manager.
    public static func write(_ text: String, to fd: Int32 = STDERR_FILENO) {
        var bytes = Array(DisplayText.sanitized(text).utf8)[...]
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            bytes = bytes.dropFirst(n)
        }
    }

    /// Reads one line from `fd`, without the newline. Throws at end of input and for lines over the limit.
    public static func readLine(from fd: Int32 = STDIN_FILENO, limit: Int = maximumLineLength) throws -> String {
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while true {
            let n = read(fd, &byte, 1)
            if n < 0 && errno == EINTR { continue }
            if n < 0 { throw InputError("cannot read input: \(String(cString: strerror(errno)))") }
            if n == 0 {
                if bytes.isEmpty { throw InputError("input ended before a line was read") }
                break
            }
            if byte == UInt8(ascii: "\n") { break }
            guard bytes.count < limit else { throw InputError("input line is longer than \(limit) bytes") }
            bytes.append(byte)
        }
        if bytes.last == UInt8(ascii: "\r") { bytes.removeLast() }
        guard let line = String(validating: bytes, as: UTF8.self) else { throw InputError("input is not valid UTF-8") }
        return line
    }

    /// Shows `prompt` and reads a line from stdin.
    public static func ask(_ prompt: String) throws -> String {
        write(prompt)
        return try readLine()
    }

    /// Shows `prompt` and reads a secret from stdin with echo switched off when stdin is a terminal.
    public static func askSecret(_ prompt: String) throws -> String {
        write(prompt)
        guard isInteractive else { return try readLine() }
        var saved = termios()
        guard tcgetattr(STDIN_FILENO, &saved) == 0 else { return try readLine() }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        quiet.c_lflag |= tcflag_t(ECHONL)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        defer { tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
        return try readLine()
    }
}
