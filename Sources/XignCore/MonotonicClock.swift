#if canImport(Glibc)
import Glibc
#endif

/// A clock that only moves forward and ignores changes to the wall clock: lifetimes the manager grants are
/// counted on it, so a host clock that is wrong or jumps neither refuses nor prolongs them.
public enum MonotonicClock {
    /// A point on the monotonic clock, so no lifetime depends on the wall clock's or the manager's time.
    public struct Instant: Sendable, Equatable, Comparable {
        public let milliseconds: Int64

        public func advanced(by milliseconds: Int64) -> Instant {
            Instant(milliseconds: self.milliseconds + milliseconds)
        }

        public static func < (lhs: Instant, rhs: Instant) -> Bool { lhs.milliseconds < rhs.milliseconds }
    }

    public static func now() -> Instant {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Instant(milliseconds: Int64(time.tv_sec) * 1000 + Int64(time.tv_nsec) / 1_000_000)
    }

    /// `expiresAt - issuedAt` from the manager's clock; nil unless it is positive and at most a day.
    static func lifetime(from issuedAt: Int64, to expiresAt: Int64) -> Int64? {
        let (lifetime, overflow) = expiresAt.subtractingReportingOverflow(issuedAt)
        guard !overflow, (1...86_400_000).contains(lifetime) else { return nil }
        return lifetime
    }
}
