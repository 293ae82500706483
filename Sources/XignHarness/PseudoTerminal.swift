import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A program run in a pseudo-terminal of its own, as a user's terminal runs it: for clients that insist on a
/// terminal (ssh, sudo). Everything it writes is collected; `expect` waits for text, `send` types.
public final class PseudoTerminal: @unchecked Sendable {
    public let pid: pid_t
    private let master: Int32
    private let lock = NSLock()
    private var collected = Data()
    private var exitStatus: Int32?
    /// Set once everything the program wrote has been read (the pty reports end of file or EIO).
    private var drained = false

    public init(
        _ executable: String, _ arguments: [String], environment: [String: String]? = nil, columns: UInt16 = 80,
        rows: UInt16 = 24
    ) throws {
        var master: Int32 = 0, slave: Int32 = 0
        var size = winsize(ws_row: rows, ws_col: columns, ws_xpixel: 0, ws_ypixel: 0)
        guard openpty(&master, &slave, nil, nil, &size) == 0 else {
            throw TestFailure("openpty: \(String(cString: strerror(errno)))")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd in [Int32(0), 1, 2] { posix_spawn_file_actions_adddup2(&actions, slave, fd) }
        // The pty's two ends, and whatever else this process holds.
        ChildProcess.closeDescriptors(from: 3, in: &actions)
        // setsid(1) gives it a session whose controlling terminal is the pty, so it can open /dev/tty; as no group's
        // leader it needs no fork for that, and its pid stays the program's.
        let spawned: pid_t
        do {
            spawned = try ChildProcess.spawn(
                "/usr/bin/setsid", ["--ctty", "--wait", executable] + arguments,
                environment: environment ?? ProcessInfo.processInfo.environment, actions: &actions, ownGroup: false)
        } catch {
            close(slave)
            close(master)
            throw error
        }
        close(slave)
        pid = spawned
        self.master = master
        Thread.detachNewThread { [self] in self.readAll() }
    }

    private func readAll() {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(master, &buffer, buffer.count)
            if n <= 0 { break }
            lock.withLock { collected.append(contentsOf: buffer.prefix(n)) }
        }
        lock.withLock { drained = true }
    }

    /// The program ended and all it wrote has been read.
    private var ended: Bool { finished != nil && lock.withLock { drained } }

    /// Everything the program wrote so far.
    public var output: String { lock.withLock { String(decoding: collected, as: UTF8.self) } }

    /// Waits until the output contains `text`, or fails after `timeout` seconds.
    @discardableResult
    public func expect(_ text: String, timeout: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let now = output
            if now.contains(text) { return now }
            if ended, !output.contains(text) {
                throw TestFailure("the program ended without printing '\(text)':\n\(output.suffix(2000))")
            }
            usleep(20_000)
        }
        throw TestFailure("no '\(text)' within \(timeout) s:\n\(output.suffix(2000))")
    }

    /// Waits until the output has a match of the regular expression `pattern`, and returns the match.
    public func expect(matching pattern: String, timeout: Double = 30) throws -> String {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            let now = output
            if let range = now.range(of: pattern, options: .regularExpression) { return String(now[range]) }
            if ended, output.range(of: pattern, options: .regularExpression) == nil {
                throw TestFailure("the program ended without printing a match of '\(pattern)':\n\(output.suffix(2000))")
            }
            usleep(20_000)
        }
        throw TestFailure("no match of '\(pattern)' within \(timeout) s:\n\(output.suffix(2000))")
    }

    public func send(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }

    /// The exit status once the program has ended.
    public var finished: Int32? {
        lock.withLock {
            if exitStatus == nil {
                var status: Int32 = 0
                if waitpid(pid, &status, WNOHANG) == pid {
                    exitStatus = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
                }
            }
            return exitStatus
        }
    }

    /// Waits for the end, killing the program after `timeout` seconds.
    @discardableResult
    public func wait(timeout: Double = 30) throws -> Int32 {
        let deadline = Date().addingTimeInterval(timeout)
        while !ended {
            if Date() > deadline {
                kill(pid, SIGKILL)
                throw TestFailure("the program did not end within \(timeout) s:\n\(output.suffix(2000))")
            }
            usleep(20_000)
        }
        return finished ?? -1
    }

    deinit {
        if finished == nil {
            kill(pid, SIGKILL)
            _ = waitpid(pid, nil, 0)
        }
        close(master)
    }
}
