/// Runs a program by a clock that is off, through libfaketime preloaded by `env`.
///
/// Not Debian's `faketime` wrapper: it makes a semaphore named after its PID in /dev/shm and leaves it there when it
/// is killed (a test's provider is), so a later wrapper that is given the same PID fails with "sem_open: File exists".
public enum FakeClock {
    static let library = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    /// The command prefix: `time` is an offset ("+6d", "-2h") or "@2020-01-01 00:00:00" for a clock that starts then.
    public static func command(_ time: String) -> [String] {
        ["/usr/bin/env", "LD_PRELOAD=\(library)", "FAKETIME=\(time)"]
    }
}
