import ArgumentParser
import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

extension QRStyle: ExpressibleByArgument {}

struct List: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the identity managers this machine is personalized for.")

    @OptionGroup var common: CommonOptions
    @Flag(
        help:
            "Also ask each manager for every device of the account: name, platform, key, factors, enrolment and last use."
    )
    var devices = false

    func run() throws {
        try reportingErrors(json: common.json) {
            let sdk = try common.sdk(user: nil)
            let entries = try sdk.store.list()
            let accountDevices =
                try devices ? entries.map { try sdk.accountDevices(idmIdentifier: $0.idmIdentifier) } : nil
            if common.json {
                Output(json: true).emit([
                    "identityManagers": .array(
                        entries.enumerated().map { index, entity in
                            var fields: [String: JSONValue] = [
                                "idmIdentifier": .string(entity.idmIdentifier),
                                "managerUrl": .string(entity.managerURL.description),
                                "activationId": .string(entity.activationId), "email": .string(entity.accountEmail),
                                "alias": .string(entity.alias),
                                "localUser": .string(entity.localUser), "keyKind": .string(entity.keyKind.rawValue),
                                "personalizedAt": .string(Self.date(entity.personalizedAt)),
                                "offline": .string(
                                    (try? sdk.offlineLogins.availability(of: entity))?.description ?? "unknown"),
                            ]
                            if let accountDevices { fields["devices"] = .array(accountDevices[index].map(Self.json)) }
                            return .object(fields)
                        })
                ])
                return
            }
            let hosts = (try? sdk.hostEnrolments()) ?? []
            if entries.isEmpty && hosts.isEmpty {
                print("This machine is not personalized yet. Start with `xign-setup register`.")
            }
            for host in hosts {
                printSanitized(
                    "Host \(host.name) of \(host.managerURL): \(DirectoryFiles.served().count) of its users are users here (xign-setup host list names them)."
                )
            }
            for (index, entity) in entries.enumerated() {
                printSanitized(
                    "\(entity.idmIdentifier)  \(entity.localUser)  \(entity.accountEmail)  \"\(entity.alias)\"  \(entity.managerURL)  \(entity.keyKind) key"
                )
                if let offline = try? sdk.offlineLogins.availability(of: entity) {
                    printSanitized("  offline login \(offline)")
                }
                for device in accountDevices?[index] ?? [] {
                    let mark = device.deviceId == entity.idmIdentifier ? "*" : " "
                    printSanitized(
                        "  \(mark) \(device.name)  \(device.platform)  \(device.keyKind.rawValue) key  \(device.factors.map(\.rawValue).joined(separator: "+"))"
                            + "  \"\(device.activationAlias)\"  enrolled \(Self.date(device.enrolledAt))  last used \(device.lastUsedAt.map(Self.date) ?? "never")"
                    )
                }
            }
        }
    }

    static func date(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).iso8601
    }

    static func json(_ device: DeviceSummary) -> JSONValue {
        .object([
            "deviceId": .string(device.deviceId), "activationAlias": .string(device.activationAlias),
            "name": .string(device.name),
            "platform": .string(device.platform), "keyKind": .string(device.keyKind.rawValue),
            "factors": .array(device.factors.map { .string($0.rawValue) }),
            "enrolledAt": .string(date(device.enrolledAt)),
            "lastUsedAt": device.lastUsedAt.map { .string(date($0)) } ?? .null,
        ])
    }
}

struct QR: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Draw any payload as a QR code in the terminal, or save it as PNG.")

    @Argument(help: "The text to encode; '-' reads one line from standard input.") var payload: String
    @Option(help: "utf8 (dark on light), utf8-inverted (light on dark) or ansi (explicit colours).") var style:
        QRStyle = .utf8
    @Option(help: "Save a PNG here instead of drawing.") var png: String?
    @Option(help: "Terminal width to fit (default: the terminal's, else 80).") var columns: Int?
    @Option(help: "Terminal height to fit (default: the terminal's; no limit when output is not a terminal).") var rows:
        Int?

    func run() throws {
        try reportingErrors(json: false) {
            let text: String
            if payload == "-" {
                do { text = try Terminal.readLine(limit: QRCode.maximumPayloadBytes) } catch {
                    throw XignSdkError(.invalidInput, "cannot read the payload: \(error)")
                }
            } else {
                text = payload
            }
            let code: QRCode
            do { code = try QRCode(encoding: text) } catch { throw XignSdkError(.invalidInput, "\(error)") }
            if let png {
                do { try AtomicFile.write(PNGWriter.png(for: code), to: png, mode: 0o644) } catch {
                    throw XignSdkError(.invalidInput, "cannot write \(png): \(error)")
                }
                print("Saved a \(code.paddedSize)×\(code.paddedSize)-module QR code to \(png).")
                return
            }
            do {
                // The shell's prompt comes back below the code.
                print(
                    try QRRenderer.render(
                        text, style: style, columns: columns ?? Terminal.columns() ?? 80, rows: rows ?? Terminal.rows(),
                        besideLines: 1),
                    terminator: "")
            } catch {
                throw XignSdkError(.invalidInput, "\(error)")
            }
        }
    }
}

struct Remove: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Deregister: revoke this machine's device at the manager and forget the enrolment here.",
        aliases: ["deregister"]
    )

    @OptionGroup var common: CommonOptions
    @Argument(help: "The idmIdentifier, as `xign-setup list` shows it.") var idmIdentifier: String
    @Flag(help: "Forget the enrolment here even though the manager cannot be told.") var localOnly = false

    func run() throws {
        try reportingErrors(json: common.json) {
            let sdk = try common.sdk(user: nil)
            let outcome = try sdk.remove(idmIdentifier: idmIdentifier, localOnly: localOnly)
            let output = Output(json: common.json)
            switch outcome {
            case .revoked: output.say("Revoked at the manager and removed from this machine.")
            case .alreadyGoneAtManager: output.say("The manager no longer knew this device; removed from this machine.")
            case .localOnly:
                output.say(
                    "Removed from this machine only; the manager still lists the device until an administrator removes it."
                )
            }
            output.emit([
                "status": .string("removed"), "idmIdentifier": .string(idmIdentifier), "manager": .string("\(outcome)"),
            ])
        }
    }
}

/// Runs a command body; errors become a message on stderr and the documented exit status.
func reportingErrors(json: Bool, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as ExitCode {
        throw error
    } catch let error as ValidationError {
        throw error
    } catch {
        throw exitCode(for: error, json: json)
    }
}

struct Doctor: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check the TPM, the device keys, the managers and the PAM configuration.",
        discussion: "Exits 0 when nothing failed (warnings included), 1 otherwise."
    )

    @OptionGroup var common: CommonOptions
    @Option(help: "Where the PAM service files are.") var pamDir = "/etc/pam.d"
    @Option(help: "The sshd whose effective configuration (sshd -T) is checked, where it is installed.")
    var sshd = "/usr/sbin/sshd"
    @Option(help: "That sshd's configuration file, when not its own default.") var sshdConfig: String?
    @Option(help: "The sudo whose settings (sudo -V, as root) are checked on a joined host, where it is installed.")
    var sudo = "/usr/bin/sudo"

    func run() throws {
        try reportingErrors(json: common.json) {
            let diagnosis = try common.sdk(user: nil).diagnose(
                pamDirectory: pamDir,
                sshdConfiguration: ProgramOutput.of(sshd, ["-T"] + (sshdConfig.map { ["-f", $0] } ?? [])),
                sudoSettings: getuid() == 0 ? ProgramOutput.of(sudo, ["-V"]) : nil)
            if common.json {
                Output(json: true).emit([
                    "status": .string(diagnosis.status.rawValue),
                    "items": .array(
                        diagnosis.items.map { item in
                            .object([
                                "name": .string(item.name), "status": .string(item.status.rawValue),
                                "detail": .string(item.detail),
                                "hint": item.hint.map(JSONValue.string) ?? .null,
                            ])
                        }),
                ])
            } else {
                for item in diagnosis.items {
                    let label = item.status.rawValue.uppercased()
                    printSanitized(
                        label + String(repeating: " ", count: max(1, 8 - label.count)) + "\(item.name): \(item.detail)")
                    if let hint = item.hint { printSanitized("        → \(hint)") }
                }
            }
            if diagnosis.status == .failure { throw ExitCode.failure }
        }
    }
}
