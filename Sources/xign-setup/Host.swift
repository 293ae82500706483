import ArgumentParser
import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

/// `xign-setup host`: this machine as a server whose users confirm their logins on an enrolled device.
struct Host: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make this machine a host that asks its users to confirm logins on an enrolled device.",
        subcommands: [Join.self, List.self]
    )

    struct Join: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Join an identity manager as a host, with a join token from its administrator.",
            discussion: """
                The administrator runs `xign-manager admin hosts add NAME` and gives you the token it prints. Paste it when asked,
                pipe it on standard input, or name a file with --token-file; it is never taken from the command line.
                """
        )

        @OptionGroup var common: CommonOptions
        @Option(help: "The identity manager's URL (https, or http on loopback).") var manager: String
        @Option(help: "Read the join token from this file instead of standard input.") var tokenFile: String?

        func run() throws {
            try reportingErrors(json: common.json) {
                let url: ManagerURL
                do { url = try ManagerURL(manager) } catch { throw XignSdkError(.invalidInput, "--manager: \(error)") }
                let token = try readToken()
                let enrolment = try common.sdkForNewKeys(user: nil).joinHost(managerURL: url, token: token)
                Output(json: common.json).emit([
                    "status": .string("joined"), "hostId": .string(enrolment.hostId), "name": .string(enrolment.name),
                    "managerUrl": .string(enrolment.managerURL.description),
                    "keyKind": .string(enrolment.keyKind.rawValue),
                    "keyAttestation": enrolment.keyAttestation.map { .string($0) } ?? .null,
                ])
                Output(json: common.json).say(
                    "Joined \(enrolment.managerURL) as host \(enrolment.name) (\(enrolment.keyKind) key"
                        + (enrolment.keyAttestation.map { ", \($0)" } ?? "") + ").")
            }
        }

        private func readToken() throws -> HostJoinToken {
            let text: String
            do {
                if let tokenFile {
                    guard let data = try AtomicFile.read(tokenFile, limit: 4096) else {
                        throw XignSdkError(.invalidInput, "--token-file \(tokenFile) does not exist")
                    }
                    text = String(decoding: data, as: UTF8.self)
                } else if Terminal.isInteractive {
                    text = try Terminal.askSecret("Join token (from xign-manager admin hosts add): ")
                } else {
                    text = try Terminal.readLine(limit: 256)
                }
            } catch let error as Terminal.InputError {
                throw XignSdkError(.invalidInput, "cannot read the join token: \(error)")
            }
            do { return try HostJoinToken(parsing: text) } catch { throw XignSdkError(.invalidInput, "\(error)") }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "List the managers this machine has joined as a host, and the users it serves from them.")
        @OptionGroup var common: CommonOptions
        @Option(help: "Where xignd keeps the user directory.") var directory = DirectoryFiles.directory

        func run() throws {
            try reportingErrors(json: common.json) {
                let hosts = try common.sdk(user: nil).hostEnrolments()
                let served = DirectoryFiles.served(in: directory)
                if common.json {
                    Output(json: true).emit([
                        "hosts": .array(
                            hosts.map { host in
                                .object([
                                    "hostId": .string(host.hostId), "name": .string(host.name),
                                    "managerUrl": .string(host.managerURL.description),
                                    "keyKind": .string(host.keyKind.rawValue),
                                ])
                            }),
                        "servedUsers": .array(
                            served.map { .object(["loginName": .string($0.name), "uid": .int(Int($0.id))]) }),
                    ])
                    return
                }
                if hosts.isEmpty {
                    print("This machine has joined no manager as a host. Start with `xign-setup host join`.")
                }
                for host in hosts {
                    printSanitized("\(host.name)  \(host.hostId)  \(host.managerURL)  \(host.keyKind) key")
                }
                if !hosts.isEmpty {
                    print(
                        served.isEmpty
                            ? "It serves no user of the manager here (libnss-xign and xignd do; see xign-setup doctor)."
                            : "Users of the manager served here (\(directory)):")
                    for user in served { printSanitized("  \(user.name)  uid \(user.id)") }
                }
            }
        }
    }
}
