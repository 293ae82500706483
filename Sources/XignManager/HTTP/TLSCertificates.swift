import Foundation
import Logging
import NIOConcurrencyHelpers
import NIOSSL
import ServiceLifecycle
import XignManagerConfiguration

/// The server's certificate chain and key from `[server] tls_certificate` and `tls_key`. Every handshake takes the
/// pair loaded last, so `reload()` (on SIGHUP) puts a renewed certificate to use without a restart.
final class TLSCertificates: Sendable {
    let paths: ManagerConfiguration.TLS
    private let current: NIOLockedValueBox<(chain: [NIOSSLCertificate], key: NIOSSLPrivateKey)>

    init(_ paths: ManagerConfiguration.TLS) throws {
        self.paths = paths
        current = NIOLockedValueBox(try Self.load(paths))
    }

    /// When the certificate in the file runs out, in seconds since 1970.
    static func notValidAfter(_ paths: ManagerConfiguration.TLS) throws -> Int64 {
        guard let leaf = try NIOSSLCertificate.fromPEMFile(paths.certificatePath).first else {
            throw ManagerError.internalFailure("\(paths.certificatePath) holds no certificate")
        }
        return Int64(leaf.notValidAfter)
    }

    /// Reads both files again; on any error the pair in use stays.
    func reload() throws {
        let loaded = try Self.load(paths)
        current.withLockedValue { $0 = loaded }
    }

    var serverConfiguration: TLSConfiguration {
        let (chain, key) = current.withLockedValue { $0 }
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.minimumTLSVersion = .tlsv12
        configuration.sslContextCallback = { [current] _, promise in
            let (chain, key) = current.withLockedValue { $0 }
            var override = NIOSSLContextConfigurationOverride()
            override.certificateChain = chain.map { .certificate($0) }
            override.privateKey = .privateKey(key)
            promise.succeed(override)
        }
        return configuration
    }

    /// Loads the pair and checks that the key is the manager's alone and belongs to the certificate.
    private static func load(
        _ paths: ManagerConfiguration.TLS
    ) throws -> (chain: [NIOSSLCertificate], key: NIOSSLPrivateKey) {
        var info = stat()
        guard stat(paths.keyPath, &info) == 0 else {
            throw ManagerError.internalFailure(
                "server.tls_key \(paths.keyPath) cannot be read: \(String(cString: strerror(errno)))")
        }
        guard info.st_mode & 0o077 == 0 else {
            throw ManagerError.internalFailure(
                "server.tls_key \(paths.keyPath) is readable by other users; chmod 0600 it (owner: the manager's user)")
        }
        let chain: [NIOSSLCertificate], key: NIOSSLPrivateKey
        do { chain = try NIOSSLCertificate.fromPEMFile(paths.certificatePath) } catch {
            throw ManagerError.internalFailure(
                "server.tls_certificate \(paths.certificatePath) is not a PEM certificate chain: \(error)")
        }
        do { key = try NIOSSLPrivateKey(file: paths.keyPath, format: .pem) } catch {
            throw ManagerError.internalFailure("server.tls_key \(paths.keyPath) is not a PEM private key: \(error)")
        }
        guard !chain.isEmpty else {
            throw ManagerError.internalFailure("server.tls_certificate \(paths.certificatePath) holds no certificate")
        }
        // A context built from the pair fails when the key does not match the certificate.
        do {
            _ = try NIOSSLContext(
                configuration: .makeServerConfiguration(
                    certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key)))
        } catch {
            throw ManagerError.internalFailure(
                "server.tls_key does not belong to server.tls_certificate (\(error)); install the matching pair")
        }
        return (chain, key)
    }
}

/// Reloads the TLS pair on SIGHUP and logs the outcome.
struct TLSReloadService: Service {
    let certificates: TLSCertificates
    let logger: Logger

    func run() async throws {
        signal(SIGHUP, SIG_IGN)
        let (hangups, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let source = DispatchSource.makeSignalSource(signal: SIGHUP)
        source.setEventHandler { continuation.yield() }
        source.resume()
        defer { source.cancel() }
        await cancelWhenGracefulShutdown {
            for await _ in hangups {
                do {
                    try certificates.reload()
                    logger.notice(
                        "TLS certificate reloaded", metadata: ["certificate": "\(certificates.paths.certificatePath)"])
                } catch {
                    logger.error("TLS certificate not reloaded, the old one stays in use: \(error)")
                }
            }
        }
    }
}
