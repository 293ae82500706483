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
}
