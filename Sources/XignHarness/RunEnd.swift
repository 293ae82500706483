import Foundation

/// What lasts as long as the test process. A static (the shared TPM, a maker's CA, the PostgreSQL cluster) is never
/// deinitialized, and atexit handlers do not run under `swift test`, so one watchdog waits for this process to end,
/// then stops the processes registered here and removes the directories, in that order.
public enum RunEnd {
    /// Sends `signal` (a name such as TERM or QUIT) to `pid` once the tests are over, and waits until it is gone.
    public static func stop(_ pid: pid_t, signal: String = "TERM") { register("stop \(signal) \(pid)") }

    /// Removes `path` and what is in it once the tests are over (and the processes are stopped).
    public static func remove(_ path: String) { register("remove \(path)") }

    private static let lock = NSLock()
    /// Held by the static, so neither is ever deinitialized: the watchdog removes its own directory last.
    nonisolated(unsafe) private static var watchdog: (directory: TemporaryDirectory, process: ChildProcess)?

    private static func register(_ line: String) {
        lock.lock()
        defer { lock.unlock() }
        do {
            if watchdog == nil { watchdog = try start() }
            let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: watchdog!.directory.file("manifest")))
            defer { try? handle.close() }
            try handle.seekToEnd()
            try handle.write(contentsOf: Data((line + "\n").utf8))
        } catch {
            FileHandle.standardError.write(Data("RunEnd: cannot register '\(line)': \(error)\n".utf8))
        }
    }

    private static func start() throws -> (TemporaryDirectory, ChildProcess) {
        let directory = TemporaryDirectory()
        let manifest = try directory.write("manifest", "")
        let script = """
            while kill -0 \(getpid()) 2>/dev/null; do sleep 1; done
            grep '^stop ' '\(manifest)' | while read -r _ signal pid; do
                kill -"$signal" "$pid" 2>/dev/null
                for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
            done
            grep '^remove ' '\(manifest)' | while read -r _ path; do rm -rf -- "$path"; done
            rm -rf -- '\(directory.path)'
            """
        return (directory, try ChildProcess("/bin/sh", ["-c", script], in: directory))
    }
}
