import Foundation
import XignProtocol
import XignTestSupport

@testable import XignCore

/// A real manager, and an SDK for one local user with its own state directory.
final class Fixture: @unchecked Sendable {
    let manager: ManagerProcess
    let directory = TemporaryDirectory()

    init(managerConfig: String = ManagerProcess.testConfig) throws {
        manager = try ManagerProcess(config: managerConfig)
    }

    /// Set to use TPM keys from this simulator; without it, keys are software keys.
    var tpm: SoftwareTPM?
    /// A change to the configuration every SDK of this fixture gets (for example `device_key`).
    var adjust: @Sendable (inout ClientConfiguration) -> Void = { _ in }

    func configuration(stateDirectory: String? = nil, timeout: Int = 5_000) -> ClientConfiguration {
        var configuration = ClientConfiguration()
        configuration.deviceKey = .software
        if let tpm {
            configuration.deviceKey = .tpm
            configuration.tcti = tpm.tcti
            // The administrator lets xign take the TPM's lockout authorization, which offline login needs.
            configuration.tpmLockout = .take
        }
        adjust(&configuration)
        configuration.stateDirectory = stateDirectory ?? directory.file("state")
        configuration.http.timeoutMilliseconds = timeout
        configuration.http.connectTimeoutMilliseconds = min(timeout, 2_000)
        return configuration
    }

    func sdk(user: String = "alice", stateDirectory: String? = nil, timeout: Int = 5_000) throws -> XignSdk {
        try XignSdk(configuration: configuration(stateDirectory: stateDirectory, timeout: timeout), localUser: user)
    }

    /// Registers `email` with `pin` through the SDK and returns the activation data from the mail.
    @discardableResult
    func register(
        _ email: String, pin: String = "24680", alias: String? = nil
    ) throws -> PersonalizationInitializationData {
        let parameters = try sdk().registry.initializationSynchronous(url: manager.url)
        try expectSetPin(parameters.pinSpec.setPin(pin))
        guard let info = parameters.selection?.info.email, info.setValue(value: email) == .valid else {
            throw TestFailure("email not accepted")
        }
        if let alias { _ = parameters.setAlias(alias) }
        guard case .success = try sdk().registry.registerSynchronous(data: parameters) else {
            throw TestFailure("registration of \(email) failed")
        }
        return try PersonalizationInitializationData(parsing: manager.activationLink(for: email))
    }

    /// Personalizes a fresh activation and returns the result.
    func personalize(
        _ data: PersonalizationInitializationData, pin: String = "24680", user: String = "alice"
    ) throws -> PersonalizationResult {
        let personalizer = try sdk(user: user).personalizer()
        guard
            case .newPersonalization(let parameters) =
                try personalizer.decryptPersonalizationInitializationDataSynchronous(data: data, pin: pin)
        else {
            throw TestFailure("expected newPersonalization")
        }
        return try personalizer.personalizeIdentityManagerSynchronous(parameters: parameters)
    }

    /// `xign-manager admin activations --json`.
    func activations() throws -> [[String: Any]] {
        let result = try manager.admin(["activations", "--json"])
        guard result.status == 0,
            let list = try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]]
        else {
            throw TestFailure("admin activations failed: \(result.stderr)")
        }
        return list
    }

    /// Files in the state directory, with their contents, to show that a failure changed nothing.
    func snapshot(of stateDirectory: String? = nil) -> [String: Data] {
        let root = stateDirectory ?? directory.file("state")
        var files: [String: Data] = [:]
        let enumerator = FileManager.default.enumerator(atPath: root)
        while let relative = enumerator?.nextObject() as? String {
            var isDirectory: ObjCBool = false
            let path = root + "/" + relative
            if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue,
                relative != ".lock"
            {
                files[relative] = FileManager.default.contents(atPath: path)
            }
        }
        return files
    }
}

func expectSetPin(_ result: PinValidator.ResultCode) throws {
    guard result == .valid else { throw TestFailure("PIN refused: \(result)") }
}
