import Foundation
import XignProtocol

/// The settings that depend on where the manager runs rather than on what it offers: TLS, the database,
/// the limits that keep one client from taking the server, and how long expired rows are kept.
extension ManagerConfiguration {
    /// `[server] tls_certificate` and `tls_key`: PEM files, reread on SIGHUP.
    public struct TLS: Sendable, Equatable {
        public var certificatePath: String
        public var keyPath: String
    }

    /// `[storage] driver = postgresql`: where the database is and how to reach it.
    public struct PostgreSQL: Sendable, Equatable {
        public var host: String
        public var port = 5432
        public var user: String
        public var database: String
        /// A file holding only the password; never the config file or the URL.
        public var passwordFile: String?
        /// Verify the server's certificate and host name (sslmode=verify-full); off only for loopback.
        public var requiresTLS: Bool
        public var caFile: String?
        public var poolSize = 10
    }

    /// What one client address may cost the manager.
    public struct Limits: Sendable, Equatable {
        /// A request's head and body must arrive within this; a kept-alive connection may idle this long.
        public var readTimeoutMilliseconds: Int64 = 10_000
        public var idleTimeoutMilliseconds: Int64 = 60_000
        /// Open connections per client address; more are closed at once. Behind a trusted proxy, requests at once per
        /// forwarded client address.
        public var connectionsPerAddress = 64
        /// Open connections from one trusted proxy, which carries many clients.
        public var connectionsPerProxy = 4096
        /// The window of the counters below.
        public var windowMilliseconds: Int64 = 600_000
        /// Registrations (each hashes a PIN and sends mail) per client address and per target address.
        public var registrationsPerAddress = 20
        public var registrationsPerEmail = 3
        /// Unauthenticated PIN checks (activation decrypts) per client address.
        public var decryptsPerAddress = 30
        /// Authentication starts per device (each makes a row and a signature): logins, approvals and api access.
        public var startsPerDevice = 600
        /// Look-ups of a login request by the approval page (unsigned: the page shows it before the passkey signs) per
        /// client address.
        public var viewsPerAddress = 300
        /// Proxies whose X-Forwarded-For names the client; from anyone else the header is ignored.
        public var trustedProxies: [String] = []

        public init() {}
    }

    static let deploymentKeys: Set<String> = [
        "server.tls_certificate", "server.tls_key",
        "storage.url", "storage.password_file", "storage.ca_file", "storage.pool_size", "storage.keep_expired",
        "limits.read_timeout", "limits.idle_timeout", "limits.connections_per_address", "limits.connections_per_proxy",
        "limits.window",
        "limits.registrations_per_address", "limits.registrations_per_email", "limits.decrypts_per_address",
        "limits.starts_per_device",
        "limits.views_per_address",
        "limits.trusted_proxies",
        "registration.open", "registration.activation_lifetime", "metrics.listen",
    ]

    mutating func readDeployment(_ file: ConfigFile, fail: (String, String) -> ConfigFile.ParseError) throws {
        switch (file.string("server.tls_certificate"), file.string("server.tls_key")) {
        case (nil, nil): tls = nil
        case (let certificate?, let key?): tls = TLS(certificatePath: certificate, keyPath: key)
        case (nil, _): throw fail("server.tls_key", "needs server.tls_certificate too")
        case (_, nil): throw fail("server.tls_certificate", "needs server.tls_key too")
        }
        switch file.string("storage.driver") ?? "sqlite" {
        case "sqlite":
            postgreSQL = nil
        case "postgresql":
            guard let url = file.string("storage.url") else {
                throw fail(
                    "storage.driver", "postgresql needs storage.url, for example postgres://xign@db.example.org/xign")
            }
            do { postgreSQL = try PostgreSQL(url: url) } catch let error as ConfigFile.ParseError {
                throw fail("storage.url", error.description)
            }
            postgreSQL?.passwordFile = file.string("storage.password_file")
            postgreSQL?.caFile = file.string("storage.ca_file")
            postgreSQL?.poolSize = try file.integer("storage.pool_size", in: 1...200) ?? 10
        case let other:
            throw fail("storage.driver", "is '\(other.prefix(40))'; use sqlite or postgresql")
        }
        if let listen = file.string("metrics.listen") {
            guard let address = Self.listenAddress(listen) else {
                throw fail("metrics.listen", "must be HOST:PORT, for example 127.0.0.1:9464")
            }
            metricsListen = address
        }
        keepExpiredMilliseconds =
            try file.milliseconds("storage.keep_expired", in: 0...(30 * 86_400_000)) ?? keepExpiredMilliseconds
        limits.readTimeoutMilliseconds =
            try file.milliseconds("limits.read_timeout", in: 500...300_000) ?? limits.readTimeoutMilliseconds
        limits.idleTimeoutMilliseconds =
            try file.milliseconds("limits.idle_timeout", in: 500...3_600_000) ?? limits.idleTimeoutMilliseconds
        limits.connectionsPerAddress =
            try file.integer("limits.connections_per_address", in: 1...100_000) ?? limits.connectionsPerAddress
        limits.connectionsPerProxy =
            try file.integer("limits.connections_per_proxy", in: 1...1_000_000) ?? limits.connectionsPerProxy
        limits.windowMilliseconds =
            try file.milliseconds("limits.window", in: 1_000...86_400_000) ?? limits.windowMilliseconds
        limits.registrationsPerAddress =
            try file.integer("limits.registrations_per_address", in: 1...1_000_000) ?? limits.registrationsPerAddress
        limits.registrationsPerEmail =
            try file.integer("limits.registrations_per_email", in: 1...1_000) ?? limits.registrationsPerEmail
        limits.decryptsPerAddress =
            try file.integer("limits.decrypts_per_address", in: 1...1_000_000) ?? limits.decryptsPerAddress
        limits.viewsPerAddress =
            try file.integer("limits.views_per_address", in: 1...1_000_000) ?? limits.viewsPerAddress
        limits.startsPerDevice =
            try file.integer("limits.starts_per_device", in: 1...1_000_000) ?? limits.startsPerDevice
        limits.trustedProxies = file.list("limits.trusted_proxies") ?? []
        registrationIsOpen = try file.bool("registration.open") ?? registrationIsOpen
        activationDataLifetimeMilliseconds =
            try file.milliseconds("registration.activation_lifetime", in: 60_000...(90 * 86_400_000))
            ?? activationDataLifetimeMilliseconds
    }
}

extension ManagerConfiguration.PostgreSQL {
    /// `postgres://USER@HOST[:PORT]/DATABASE[?sslmode=disable|verify-full]`; a password in the URL is refused.
    init(url text: String) throws {
        func fail(_ why: String) -> ConfigFile.ParseError { ConfigFile.ParseError(description: why) }
        guard let url = URLComponents(string: text), ["postgres", "postgresql"].contains(url.scheme ?? ""),
            let host = url.host, !host.isEmpty
        else {
            throw fail("must look like postgres://USER@HOST:PORT/DATABASE")
        }
        guard url.password == nil else {
            throw fail("holds a password; put it in storage.password_file (mode 0600) instead")
        }
        guard let user = url.user, !user.isEmpty else {
            throw fail("names no user; write postgres://USER@\(host)/DATABASE")
        }
        let database = String(url.path.drop(while: { $0 == "/" }))
        guard !database.isEmpty, !database.contains("/") else {
            throw fail("names no database; write postgres://\(user)@\(host)/DATABASE")
        }
        self.host = host.trimmingCharacters(in: CharacterSet(charactersIn: "[]"))
        self.user = user
        self.database = database
        port = url.port ?? 5432
        switch url.queryItems?.first(where: { $0.name == "sslmode" })?.value {
        case nil: requiresTLS = !ManagerURL.isLoopback(host: self.host)
        case "verify-full": requiresTLS = true
        case "disable": requiresTLS = false
        case let other?:
            throw fail(
                "has sslmode=\(other.prefix(20)); use verify-full (TLS, certificate and host name checked) or disable")
        }
        guard (url.queryItems ?? []).allSatisfy({ $0.name == "sslmode" }) else {
            throw fail("may carry only sslmode=… as a parameter")
        }
    }
}
