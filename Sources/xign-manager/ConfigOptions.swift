import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

/// Where the manager's config comes from: a file, a data directory for everything, or both.
struct ConfigOptions: ParsableArguments {
    @Option(help: "Config file (default: /etc/xign-manager/manager.conf when it exists).")
    var config: String?

    @Option(help: "Keep the database, keys and outbox in this directory instead of the paths in the config.")
    var dataDir: String?

    /// Every command reads its configuration first, before any thread and before the TPM pepper may be opened.
    func load() throws -> ManagerConfiguration {
        TPMLog.quiet()
        var configuration: ManagerConfiguration
        do {
            if let config {
                configuration = try ManagerConfiguration.load(path: config)
            } else if FileManager.default.fileExists(atPath: "/etc/xign-manager/manager.conf") && dataDir == nil {
                configuration = try ManagerConfiguration.load(path: "/etc/xign-manager/manager.conf")
            } else {
                configuration = ManagerConfiguration()
            }
        } catch {
            throw ValidationError("\(error)")
        }
        if let dataDir { configuration.keepData(in: dataDir) }
        return configuration
    }

    /// Opens the manager's data (from `configuration`, else the loaded config), runs `body` and closes the database
    /// whatever happens.
    func withManager<T>(
        _ configuration: ManagerConfiguration? = nil, logLevel: Logger.Level = .warning,
        _ body: (IdentityManager) async throws -> T
    ) async throws -> T {
        umask(0o077)
        ManagerLogHandler.install()
        var logger = Logger(label: "xign-manager")
        logger.logLevel = logLevel
        let manager: IdentityManager
        do {
            manager = try await IdentityManager.open(configuration: try configuration ?? load(), logger: logger)
        } catch let error as ValidationError {
            throw error
        } catch {
            throw ValidationError("cannot open the manager's data: \(error)")
        }
        do {
            let result = try await body(manager)
            await manager.database.close()
            return result
        } catch let error as ManagerError {
            await manager.database.close()
            throw ValidationError("\(error)")
        } catch {
            await manager.database.close()
            throw error
        }
    }
}

extension ConfigOptions {
    /// Creates an account, sends its mail now (no relay loop runs in this process) and prints the PIN, once.
    func createAccount(
        email: String, loginName: String? = nil, organization: String? = nil, mailed: String
    ) async throws {
        let pin = try await withManager { manager in
            let pin = try await manager.administration.createAccount(
                email: email, loginName: loginName, organization: organization)
            await manager.mail.sendNow()
            return pin
        }
        print(mailed)
        print("Activation PIN (give it to the user by phone or in person): \(pin)")
    }
}
