import ArgumentParser
import Foundation
import Hummingbird
import Logging
import XignDevice
import XignManager
import XignManagerConfiguration
import XignProtocol

extension Admin {
    struct Activations: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List activations with their lockout state.")
        @OptionGroup var options: ConfigOptions
        @Option(help: "Only this account.") var email: String?
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let activations = try await options.withManager { try await $0.administration.activations(email: email) }
            if json { return try printJSON(activations) }
            for a in activations {
                var lock = "not locked"
                if a.permanentlyLocked {
                    lock = "locked permanently"
                } else if a.lockedUntil > Int64(Date().timeIntervalSince1970 * 1000) {
                    lock = "locked until \(Date(timeIntervalSince1970: Double(a.lockedUntil) / 1000))"
                }
                let kind =
                    a.synced.map { $0 ? "synced passkey" : "device-bound passkey" }
                    ?? a.ekIssuer.map { "attested tpm key, EK issuer \($0)" } ?? "\(a.keyKind?.rawValue ?? "-") key"
                let device = a.deviceName.map { name in
                    "\(name) (\(a.platform ?? "-"), \(kind), \((a.factors ?? []).map(\.rawValue).joined(separator: "+")))"
                        + ", enrolled \(a.enrolledAt.map(isoDate) ?? "never"), last used \(a.lastUsedAt.map(isoDate) ?? "never")"
                }
                print(
                    "\(a.id)\t\(a.email)\t\(a.alias)\t\(a.state.rawValue)\t\(device ?? "no device")\t\(a.failedAttempts) failure(s), \(lock)"
                )
            }
        }
    }

    struct Unlock: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Lift the lockout of an activation, permanent ones included.")
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The activation id, as `admin activations` prints it.") var activation: String

        func run() async throws {
            try await options.withManager { try await $0.administration.unlock(activationId: activation) }
            print("Lockout lifted for \(activation).")
        }
    }

    struct Reissue: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Mail new activation data for an activation; the data before it stops working.",
            discussion:
                "Activation data is single-use and expires (registration.activation_lifetime). With new data the user moves the activation to another machine (override) or adds one, with the activation's PIN."
        )
        @OptionGroup var options: ConfigOptions
        @Argument(help: "The activation id, as `admin activations` prints it.") var activation: String

        func run() async throws {
            let (email, validUntil) = try await options.withManager {
                try await $0.administration.reissueActivationData(activationId: activation)
            }
            print("New activation data mailed to \(email), usable once until \(isoDate(validUntil)).")
        }
    }
}
