import CCurl
import FoundationEssentials
import Synchronization
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Blocking HTTP over libcurl's easy interface: no threads, no signals, hard timeouts, a bounded response.
/// This is the only way XignCore talks to a manager, so it is also the one place that enforces docs/design.md's invariant 1.
public struct HTTPClient: Sendable {
    /// Timeouts and trust for every call to a manager; the PAM path never waits longer than these.
    public struct Configuration: Sendable, Equatable {
        /// The whole exchange, connect included.
        public var timeoutMilliseconds = 10_000
        public var connectTimeoutMilliseconds = 5_000
        /// PEM bundle to trust instead of the system CAs.
        public var caFile: String?
        /// An explicit proxy; nil means none. Proxy variables in the environment are never read.
        public var proxy: String?
        public var maximumResponseBytes = 64 * 1024

        public init() {}
    }

    /// A manager's answer, already size-limited.
    public struct Response: Sendable {
        public var status: Int
        public var body: Data
        public var contentType: String?
    }

    /// Why a call got no answer, kept apart from a refusal so the login can say "unreachable".
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case insecureTransport(String)
        case timedOut(String)
        case unreachable(String)
        case tls(String)
        case responseTooLarge(Int)
        case transport(String)

        public var description: String {
            switch self {
            case .insecureTransport(let why): return why
            case .timedOut(let url): return "the manager at \(url) did not answer in time"
            case .unreachable(let why): return "cannot reach the manager: \(why)"
            case .tls(let why):
                return "TLS failed: \(why); check the manager's certificate or ca_file in /etc/xign/xign.conf"
            case .responseTooLarge(let limit):
                return "the manager's answer is larger than \(limit) bytes; is the manager URL right?"
            case .transport(let why): return "HTTP failed: \(why)"
            }
        }
    }

    public var configuration: Configuration
    /// One libcurl handle kept between calls, so the requests of a login share a connection and a TLS session.
    private let kept = KeptHandle()

    public init(configuration: Configuration = Configuration()) {
        self.configuration = configuration
    }

    private static let globalInit: CURLcode = curl_global_init(Int(CURL_GLOBAL_DEFAULT))

    /// `contentType` names the body's type (JSON to a manager; a form to an identity provider's token endpoint).
    public func send(
        _ method: String, to manager: ManagerURL, path: String, body: Data? = nil, headers: [(String, String)] = [],
        contentType: String = "application/json"
    ) throws -> Response {
        do { try manager.checkTransportPolicy() } catch { throw Failure.insecureTransport("\(error)") }
        let url = manager.endpoint(path)
        guard Self.globalInit == CURLE_OK, let handle = kept.take() ?? curl_easy_init() else {
            throw Failure.transport("libcurl could not start")
        }
        defer { kept.keep(handle) }

        let sink = Sink(limit: configuration.maximumResponseBytes)
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)

        var list: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(list) }
        for (name, value) in headers + [("Accept", "application/json, application/jose"), ("Expect", "")] {
            list = curl_slist_append(list, "\(name): \(value)")
        }
        if body != nil { list = curl_slist_append(list, "Content-Type: \(contentType)") }

        let started = MonotonicClock.now()
        let code: CURLcode = withExtendedLifetime(sink) {
            errorBuffer.withUnsafeMutableBufferPointer { errors -> CURLcode in
                var setup = [
                    xign_curl_setopt_string(handle, CURLOPT_URL, url),
                    xign_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1),
                    xign_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, configuration.timeoutMilliseconds),
                    xign_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, configuration.connectTimeoutMilliseconds),
                    xign_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https"),
                    xign_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0),
                    xign_curl_setopt_long(handle, CURLOPT_SSL_VERIFYPEER, 1),
                    xign_curl_setopt_long(handle, CURLOPT_SSL_VERIFYHOST, 2),
                    // An empty proxy disables proxies, including any the environment names.
                    xign_curl_setopt_string(handle, CURLOPT_PROXY, configuration.proxy ?? ""),
                    xign_curl_setopt_string(handle, CURLOPT_USERAGENT, "xign/\(XignCoreVersion.string)"),
                    xign_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, UnsafeMutableRawPointer(list)),
                    xign_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, UnsafeMutableRawPointer(errors.baseAddress)),
                    xign_curl_setopt_write(handle, Self.writer),
                    xign_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(sink).toOpaque()),
                ]
                if let caFile = configuration.caFile {
                    setup.append(xign_curl_setopt_string(handle, CURLOPT_CAINFO, caFile))
                }
                if let body {
                    setup.append(xign_curl_setopt_long(handle, CURLOPT_POSTFIELDSIZE, body.count))
                    setup.append(
                        body.withUnsafeBytes {
                            xign_curl_setopt_pointer(
                                handle, CURLOPT_COPYPOSTFIELDS,
                                UnsafeMutableRawPointer(mutating: $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)!))
                        })
                }
                if method != "GET" && method != "POST" {
                    setup.append(xign_curl_setopt_string(handle, CURLOPT_CUSTOMREQUEST, method))
                }
                if let failed = setup.first(where: { $0 != CURLE_OK }) { return failed }
                return curl_easy_perform(handle)
            }
        }
        if let failure = Self.failure(
            code, errorBuffer, overflowed: sink.overflowed, url: url, limit: configuration.maximumResponseBytes)
        {
            throw Self.checked(
                failure, elapsed: MonotonicClock.now().milliseconds - started.milliseconds,
                timeout: configuration.timeoutMilliseconds)
        }
        var status = 0
        xign_curl_response_code(handle, &status)
        var type: UnsafeMutablePointer<CChar>?
        xign_curl_content_type(handle, &type)
        return Response(status: status, body: sink.data, contentType: type.map { String(cString: $0) })
    }

    /// What libcurl's answer means for the caller: nil when a response arrived.
    private static func failure(
        _ code: CURLcode, _ errorBuffer: [CChar], overflowed: Bool, url: String, limit: Int
    ) -> Failure? {
        let detail = String(decoding: errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let reason = detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
        switch code {
        case CURLE_OK: return nil
        case CURLE_WRITE_ERROR where overflowed: return .responseTooLarge(limit)
        case CURLE_OPERATION_TIMEDOUT: return .timedOut(url)
        case CURLE_COULDNT_CONNECT, CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY: return .unreachable(reason)
        case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_CERTPROBLEM:
            return .tls(reason)
        case CURLE_GOT_NOTHING, CURLE_RECV_ERROR, CURLE_SEND_ERROR, CURLE_PARTIAL_FILE:
            return .unreachable("the connection broke off (\(reason))")
        default: return .transport(reason)
        }
    }

    /// A silence that proves nothing about the manager is a transport failure, not "unreachable": this process was
    /// held up past the timeout (stopped, as the caller of su can do), or it cannot open a socket (its descriptors
    /// taken by a lowered RLIMIT_NOFILE). Offline login follows only "unreachable" (docs/security.md, G4).
    static func checked(_ failure: Failure, elapsed: Int64, timeout: Int) -> Failure {
        switch failure {
        case .timedOut, .unreachable: break
        default: return failure
        }
        if elapsed > Int64(timeout) + Self.stallAllowanceMilliseconds {
            return .transport(
                "this program was held up for \(elapsed) ms, past the timeout of \(timeout) ms, so the manager's silence proves nothing"
            )
        }
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard probe >= 0 else {
            return .transport("this program cannot open a socket (\(String(cString: strerror(errno))))")
        }
        close(probe)
        return failure
    }

    /// How far past its timeout a call may end before it counts as held up: scheduling on a loaded machine.
    static let stallAllowanceMilliseconds: Int64 = 2_000

    /// The handle a finished call leaves for the next. A call takes it (or makes its own while another call has it),
    /// and `curl_easy_reset` clears every option but keeps the open connection and the TLS session cache.
    private final class KeptHandle: Sendable {
        /// A handle is used by one call at a time: the one that took it.
        private struct Handle: @unchecked Sendable { let pointer: UnsafeMutableRawPointer }
        private let handle = Mutex<Handle?>(nil)

        func take() -> UnsafeMutableRawPointer? { handle.withLock { $0.take() }?.pointer }

        func keep(_ finished: UnsafeMutableRawPointer) {
            curl_easy_reset(finished)
            let kept = handle.withLock { kept in
                guard kept == nil else { return false }
                kept = Handle(pointer: finished)
                return true
            }
            if !kept { curl_easy_cleanup(finished) }
        }

        deinit { handle.withLock { $0 }.map { curl_easy_cleanup($0.pointer) } }
    }

    /// The response body, collected up to a limit; past it the transfer stops.
    private final class Sink {
        var data = Data()
        let limit: Int
        var overflowed = false
        init(limit: Int) { self.limit = limit }
    }

    private static let writer:
        @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int = {
            pointer, size, count, context in
            let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
            let length = size * count
            guard sink.data.count + length <= sink.limit else {
                sink.overflowed = true
                return 0  // makes libcurl stop with CURLE_WRITE_ERROR
            }
            if let pointer {
                sink.data.append(UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self), count: length)
            }
            return length
        }
}

/// The version every front end reports, and sends to the manager in its user agent.
public enum XignCoreVersion {
    public static let string = "0.1.0"
}
