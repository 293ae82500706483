import Foundation
import Logging
import XignProtocol

/// The manager's log: one line per record on stderr, its syslog priority in front as journald reads it. Messages
/// and metadata carry what clients sent (addresses, names, hosts), so every part goes through `LogText`: a value
/// can neither start a journal entry of its own nor set its priority.
public struct ManagerLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    private let label: String

    public init(label: String) { self.label = label }

    /// Makes it the process's log handler; once, however often it is called.
    public static func install() { _ = installed }
    private static let installed: Void = LoggingSystem.bootstrap(ManagerLogHandler.init)

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(
        level: Logger.Level, message: Logger.Message, metadata extra: Logger.Metadata?, source: String, file: String,
        function: String,
        line: UInt
    ) {
        let merged = metadata.merging(extra ?? [:]) { $1 }
        let fields = merged.sorted { $0.key < $1.key }.map {
            "\(LogText.field($0.key, maximumLength: 64))=\(LogText.field("\($0.value)"))"
        }
        let text = ([LogText.field(message.description, maximumLength: 2048)] + fields).joined(separator: " ")
        let prefix = Self.toTerminal ? "" : "<\(Self.priority(level))>"
        FileHandle.standardError.write(Data("\(prefix)\(level) \(label): \(text)\n".utf8))
    }

    /// An administrator's terminal gets the line without the priority journald reads.
    private static let toTerminal = isatty(STDERR_FILENO) == 1

    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
