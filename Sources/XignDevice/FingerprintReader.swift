import CXignDBus
import FoundationEssentials

#if canImport(Glibc)
import Glibc
#endif

/// The biometric factor on Linux: fprintd, asked over the system bus for a local user's enrolled fingers.
///
/// Synchronous with one deadline, for the PAM path. The bus is named by address, never found through the
/// environment, and the connection is private to one call, so a PAM host's own bus use is left alone.
public struct FingerprintReader: Sendable, Equatable {
    public static let defaultBusAddress = "unix:path=/run/dbus/system_bus_socket"
    public let busAddress: String
    public let timeoutMilliseconds: Int
    /// fprintd's state directory, where its prints are (FingerprintEnrolment).
    public let printsDirectory: String
    /// Whether a finger factor stops counting once the user's enrolled fingers change (Nevis's invalidateOnNewOsBiometrics).
    public let invalidatesOnNewFingers: Bool

    public init(
        busAddress: String = defaultBusAddress, timeoutMilliseconds: Int = 15_000,
        printsDirectory: String = FingerprintEnrolment.defaultDirectory,
        invalidatesOnNewFingers: Bool = true
    ) {
        self.busAddress = busAddress
        self.timeoutMilliseconds = timeoutMilliseconds
        self.printsDirectory = printsDirectory
        self.invalidatesOnNewFingers = invalidatesOnNewFingers
    }

    /// The digest of `user`'s enrolled fingers that a factor is bound to; nil where binding is switched off.
    public func enrolmentDigest(user: String) throws -> String? {
        guard invalidatesOnNewFingers else { return nil }
        do { return try FingerprintEnrolment.digest(user: user, directory: printsDirectory) } catch let error
            as FingerprintEnrolment.EnrolmentError
        {
            throw ReaderError(kind: .unavailable, description: error.description)
        }
    }

    public struct ReaderError: Error, CustomStringConvertible, Equatable {
        public enum Kind: Sendable { case unavailable, noEnrolledFingers, timedOut, failed }
        public let kind: Kind
        public let description: String
    }

    /// The fingers `user` enrolled with fprintd (`fprintd-enroll`); empty when none.
    public func enrolledFingers(user: String) throws -> [String] {
        try withConnection { bus in
            let device = try bus.defaultDevice()
            do {
                return try bus.call(device, "ListEnrolledFingers", [user]).strings()
            } catch let error as ReaderError where error.kind == .noEnrolledFingers {
                return []
            }
        }
    }

    /// Asks `user` for a finger and compares it with theirs: true on a match, false on no match.
    /// `prompt` gets what to tell the user (touch the reader, or try again after a bad swipe).
    public func verify(user: String, prompt: (String) -> Void) throws -> Bool {
        try withConnection { bus in
            let device = try bus.defaultDevice()
            _ = try bus.call(device, "Claim", [user])
            defer { bus.cleanUp(device, "Release") }
            try bus.subscribe(device)
            _ = try bus.call(device, "VerifyStart", ["any"])
            defer { bus.cleanUp(device, "VerifyStop") }
            prompt("Touch the fingerprint reader.")
            while true {
                let (result, done) = try bus.nextVerifyStatus(device)
                switch result {
                case "verify-match": return true
                case "verify-no-match": return false
                case "verify-retry-scan", "verify-swipe-too-short", "verify-finger-not-centered",
                    "verify-remove-and-retry":
                    prompt("The reader could not read the finger; touch it again.")
                default:
                    if done {
                        throw ReaderError(
                            kind: .failed, description: "fprintd ended the verification with \(result.prefix(64))")
                    }
                }
            }
        }
    }

    private func withConnection<T>(_ body: (Bus) throws -> T) throws -> T {
        let bus = try Bus(address: busAddress, deadline: .now + .milliseconds(timeoutMilliseconds))
        defer { bus.close() }
        return try body(bus)
    }
}

/// One private connection to the bus that fprintd is on.
private final class Bus {
    static let service = "net.reactivated.Fprint"
    static let deviceInterface = "net.reactivated.Fprint.Device"
    let dbus: xign_dbus_functions
    let connection: OpaquePointer
    let deadline: ContinuousClock.Instant
    /// The unique name (":1.N") that owned fprintd's well-known name when the connection opened.
    private(set) var fprintd = Bus.service

    init(address: String, deadline: ContinuousClock.Instant) throws {
        guard let dbus = xign_dbus_open()?.pointee else {
            throw FingerprintReader.ReaderError(
                kind: .unavailable,
                description: "libdbus is not installed, so fprintd cannot be asked (Debian: apt install libdbus-1-3)")
        }
        self.dbus = dbus
        var error = DBusError()
        dbus.dbus_error_init(&error)
        guard let connection = dbus.dbus_connection_open_private(address, &error) else {
            throw Self.readerError(dbus, &error, .unavailable, "cannot reach the system bus at \(address)")
        }
        // Never exit the process (a PAM host) when the bus goes away.
        dbus.dbus_connection_set_exit_on_disconnect(connection, 0)
        guard dbus.dbus_bus_register(connection, &error) != 0 else {
            dbus.dbus_connection_close(connection)
            dbus.dbus_connection_unref(connection)
            throw Self.readerError(dbus, &error, .unavailable, "the system bus refused us")
        }
        self.connection = connection
        self.deadline = deadline
        // Any client on the system bus may send a signal straight to this connection, so a verdict counts only from
        // the connection that owns fprintd's name, and calls go to that same connection.
        do {
            guard
                let owner = try call(
                    destination: "org.freedesktop.DBus", path: "/org/freedesktop/DBus", "org.freedesktop.DBus",
                    "GetNameOwner", [Self.service]
                ).objectPath(), owner.hasPrefix(":")
            else { throw FingerprintReader.ReaderError.failed("the bus named no owner of \(Self.service)") }
            fprintd = owner
        } catch let error as FingerprintReader.ReaderError where error.description.contains("NameHasNoOwner") {
            close()
            throw FingerprintReader.ReaderError(
                kind: .unavailable, description: "fprintd is not running (no owner of \(Self.service))")
        } catch {
            close()
            throw error
        }
    }

    func close() {
        dbus.dbus_connection_close(connection)
        dbus.dbus_connection_unref(connection)
    }

    var remainingMilliseconds: Int32 {
        let left = ContinuousClock.now.duration(to: deadline).components
        return Int32(clamping: max(0, left.seconds * 1000 + left.attoseconds / 1_000_000_000_000_000))
    }

    func defaultDevice() throws -> String {
        guard
            let path = try call(
                path: "/net/reactivated/Fprint/Manager", "net.reactivated.Fprint.Manager", "GetDefaultDevice", []
            ).objectPath()
        else {
            throw FingerprintReader.ReaderError.failed("fprintd named no device")
        }
        return path
    }

    func call(_ device: String, _ method: String, _ arguments: [String]) throws -> Reply {
        try call(path: device, Self.deviceInterface, method, arguments)
    }

    /// Ends a verification or a claim even after the deadline (a second at most), and waits for fprintd to
    /// confirm, so the reader is free for the next login the moment this one returns.
    func cleanUp(_ device: String, _ method: String) {
        _ = try? call(path: device, Self.deviceInterface, method, [], timeout: max(remainingMilliseconds, 1_000))
    }

    func call(
        destination: String? = nil, path: String, _ interface: String, _ method: String, _ arguments: [String],
        timeout: Int32? = nil
    ) throws -> Reply {
        guard let message = dbus.dbus_message_new_method_call(destination ?? fprintd, path, interface, method) else {
            throw FingerprintReader.ReaderError.failed("out of memory")
        }
        defer { dbus.dbus_message_unref(message) }
        var iterator = DBusMessageIter()
        dbus.dbus_message_iter_init_append(message, &iterator)
        for argument in arguments {
            let appended = argument.withCString { text in
                var pointer: UnsafePointer<CChar>? = text
                return dbus.dbus_message_iter_append_basic(&iterator, Int32(UInt8(ascii: "s")), &pointer)
            }
            guard appended != 0 else { throw FingerprintReader.ReaderError.failed("out of memory") }
        }
        var error = DBusError()
        dbus.dbus_error_init(&error)
        guard
            let reply = dbus.dbus_connection_send_with_reply_and_block(
                connection, message, timeout ?? max(1, remainingMilliseconds), &error)
        else {
            let timedOut = error.name.map { String(cString: $0) == DBUS_ERROR_NO_REPLY } ?? false
            throw Self.readerError(dbus, &error, timedOut ? .timedOut : .failed, "fprintd \(method)")
        }
        return Reply(reply, dbus)
    }

    func subscribe(_ device: String) throws {
        var error = DBusError()
        dbus.dbus_error_init(&error)
        dbus.dbus_bus_add_match(
            connection,
            "type='signal',sender='\(fprintd)',interface='\(Self.deviceInterface)',member='VerifyStatus',path='\(device)'",
            &error)
        if dbus.dbus_error_is_set(&error) != 0 {
            throw Self.readerError(dbus, &error, .failed, "cannot follow the verification")
        }
    }

    /// Waits, until the deadline, for the device's next VerifyStatus signal.
    func nextVerifyStatus(_ device: String) throws -> (result: String, done: Bool) {
        while true {
            if let message = dbus.dbus_connection_pop_message(connection) {
                defer { dbus.dbus_message_unref(message) }
                guard dbus.dbus_message_is_signal(message, Self.deviceInterface, "VerifyStatus") != 0,
                    dbus.dbus_message_get_sender(message).map({ String(cString: $0) }) == fprintd,
                    dbus.dbus_message_get_path(message).map({ String(cString: $0) }) == device
                else { continue }
                var iterator = DBusMessageIter()
                guard dbus.dbus_message_iter_init(message, &iterator) != 0, let result = Reply.string(&iterator, dbus),
                    dbus.dbus_message_iter_next(&iterator) != 0,
                    dbus.dbus_message_iter_get_arg_type(&iterator) == Int32(UInt8(ascii: "b"))
                else { throw FingerprintReader.ReaderError.failed("fprintd sent a malformed VerifyStatus") }
                var done: dbus_bool_t = 0
                dbus.dbus_message_iter_get_basic(&iterator, &done)
                return (result, done != 0)
            }
            let left = remainingMilliseconds
            guard left > 0 else {
                throw FingerprintReader.ReaderError(kind: .timedOut, description: "no finger on the reader in time")
            }
            guard dbus.dbus_connection_read_write(connection, left) != 0 else {
                throw FingerprintReader.ReaderError(
                    kind: .unavailable, description: "the system bus went away during the verification")
            }
        }
    }

    static func readerError(
        _ dbus: xign_dbus_functions, _ error: inout DBusError, _ kind: FingerprintReader.ReaderError.Kind,
        _ what: String
    ) -> FingerprintReader.ReaderError {
        defer { dbus.dbus_error_free(&error) }
        let name = error.name.map { String(cString: $0) } ?? "unknown"
        let message = error.message.map { String(String(cString: $0).prefix(200)) } ?? ""
        if name.hasSuffix("NoSuchDevice") {
            return FingerprintReader.ReaderError(kind: .unavailable, description: "fprintd sees no fingerprint reader")
        }
        let kind = name.hasSuffix("NoEnrolledPrints") ? .noEnrolledFingers : kind
        return FingerprintReader.ReaderError(kind: kind, description: "\(what): \(name) \(message)")
    }
}

extension FingerprintReader.ReaderError {
    fileprivate static func failed(_ why: String) -> Self { Self(kind: .failed, description: why) }
}

/// A method reply; owns the message.
private final class Reply {
    let message: OpaquePointer
    let dbus: xign_dbus_functions
    init(_ message: OpaquePointer, _ dbus: xign_dbus_functions) { (self.message, self.dbus) = (message, dbus) }
    deinit { dbus.dbus_message_unref(message) }

    static func string(_ iterator: inout DBusMessageIter, _ dbus: xign_dbus_functions) -> String? {
        let type = dbus.dbus_message_iter_get_arg_type(&iterator)
        guard type == Int32(UInt8(ascii: "s")) || type == Int32(UInt8(ascii: "o")) else { return nil }
        var pointer: UnsafePointer<CChar>?
        dbus.dbus_message_iter_get_basic(&iterator, &pointer)
        return pointer.map { String(String(cString: $0).prefix(256)) }
    }

    func objectPath() -> String? {
        var iterator = DBusMessageIter()
        guard dbus.dbus_message_iter_init(message, &iterator) != 0 else { return nil }
        return Self.string(&iterator, dbus)
    }

    /// An array of strings, at most 32 of them.
    func strings() throws -> [String] {
        var iterator = DBusMessageIter()
        guard dbus.dbus_message_iter_init(message, &iterator) != 0,
            dbus.dbus_message_iter_get_arg_type(&iterator) == Int32(UInt8(ascii: "a"))
        else {
            throw FingerprintReader.ReaderError.failed("fprintd answered without a list")
        }
        var element = DBusMessageIter()
        dbus.dbus_message_iter_recurse(&iterator, &element)
        var values: [String] = []
        while values.count < 32, let value = Self.string(&element, dbus) {
            values.append(value)
            if dbus.dbus_message_iter_next(&element) == 0 { break }
        }
        return values
    }
}
