import Foundation

/// What a program that reports a configuration prints, for doctor: `sshd -T` (sshd's effective configuration, after
/// its defaults and Include files) and `sudo -V` (sudoers' settings, as root).
enum ProgramOutput {
    struct Unreadable: Error, CustomStringConvertible {
        let description: String
    }

    /// nil where `program` is not installed; otherwise what it printed, or why it did not, within five seconds.
    static func of(_ program: String, _ arguments: [String]) -> Result<String, any Error>? {
        guard FileManager.default.isExecutableFile(atPath: program) else { return nil }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: program)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        return Result {
            try process.run()
            let timer = DispatchWorkItem { process.terminate() }
            DispatchQueue.global().asyncAfter(deadline: .now() + 5, execute: timer)
            let printed = output.fileHandleForReading.readDataToEndOfFile().prefix(256 * 1024)
            let complaint = errors.fileHandleForReading.readDataToEndOfFile().prefix(1024)
            process.waitUntilExit()
            timer.cancel()
            guard process.terminationReason == .exit, process.terminationStatus == 0 else {
                let said = String(decoding: complaint, as: UTF8.self).split(separator: "\n").first.map(String.init)
                throw Unreadable(description: said ?? "\(program) ended with \(process.terminationStatus)")
            }
            return String(decoding: printed, as: UTF8.self)
        }
    }
}
