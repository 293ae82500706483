import Foundation
import Testing
import XignDevice
import XignTestSupport

/// FingerprintReader against the real fprintd: what a login meets when something is missing or nobody touches.
@Suite struct FingerprintReaderTests {
    func kind(_ body: () throws -> Void) -> FingerprintReader.ReaderError.Kind? {
        do { try body() } catch let error as FingerprintReader.ReaderError { return error.kind } catch {}
        return nil
    }

    @Test func noBusIsUnavailableAtOnce() {
        let reader = FingerprintReader(busAddress: "unix:path=/nonexistent/xign-test-bus", timeoutMilliseconds: 5_000)
        let started = Date()
        #expect(kind { _ = try reader.verify(user: "alice") { _ in } } == .unavailable)
        #expect(Date().timeIntervalSince(started) < 1)
    }

    @Test func noEnrolledFingerNoTouchAndThenATouch() throws {
        let daemon = try FingerprintDaemon()
        let reader = FingerprintReader(busAddress: daemon.busAddress, timeoutMilliseconds: 1_000)
        #expect(try reader.enrolledFingers(user: "alice") == [])
        #expect(kind { _ = try reader.verify(user: "alice") { _ in } } == .noEnrolledFingers)

        try daemon.enrol(user: "alice", finger: "alice-right")
        #expect(try reader.enrolledFingers(user: "alice") == ["right-index-finger"])
        // Nobody touches the reader: the wait ends at the deadline, not later.
        let started = Date()
        #expect(kind { _ = try reader.verify(user: "alice") { _ in } } == .timedOut)
        #expect(Date().timeIntervalSince(started) < 3)
        // The timed-out verification released the device, so the next one can claim it.
        daemon.scanLater("alice-right")
        #expect(try FingerprintReader(busAddress: daemon.busAddress).verify(user: "alice") { _ in })
    }

    /// Any local user may send a signal straight to the reader's connection; only fprintd's verdict counts.
    @Test func aForgedMatchFromAnotherUsersConnectionDoesNotPass() throws {
        let daemon = try FingerprintDaemon()
        try daemon.enrol(user: "alice", finger: "alice-right")
        let reader = FingerprintReader(busAddress: daemon.busAddress, timeoutMilliseconds: 5_000)
        var forged = 0
        let outcome = kind {
            // The forgeries are sent while the verification runs (after VerifyStart), before the reader reads its
            // next message, so they wait in its queue ahead of anything fprintd says.
            let matched = try reader.verify(user: "alice") { _ in
                forged = (try? daemon.forgeVerifyStatus("verify-match", asUser: "nobody")) ?? 0
            }
            Issue.record("the verification ended with \(matched) instead of waiting for a finger")
        }
        #expect(forged >= 1, "the bus delivered the forgery to at least the reader's connection")
        #expect(outcome == .timedOut, "the forged match was ignored and the reader waited for a finger")
        // Honest control: fprintd's own verdict still passes.
        daemon.scanLater("alice-right")
        #expect(try FingerprintReader(busAddress: daemon.busAddress).verify(user: "alice") { _ in })
    }
}
