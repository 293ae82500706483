import Foundation
import Testing
import XignCore
import XignProtocol

/// xign.conf's fingerprint settings: the bus is a socket path, and the wait is bounded.
@Suite struct ClientConfigurationTests {
    func load(_ text: String) throws -> ClientConfiguration {
        try ClientConfiguration(file: try ConfigFile(text: text, source: "xign.conf"))
    }

    @Test func theFingerprintReaderDefaultsToTheSystemBus() throws {
        let configuration = try load("")
        #expect(configuration.fingerprintReader.busAddress == "unix:path=/run/dbus/system_bus_socket")
        #expect(configuration.fingerprintReader.timeoutMilliseconds == 15_000)
        let custom = try load("fprintd_bus = unix:path=/tmp/bus\nfingerprint_timeout = 30s\n")
        #expect(
            custom.fingerprintReader == FingerprintReader(busAddress: "unix:path=/tmp/bus", timeoutMilliseconds: 30_000)
        )
    }

    /// Every setting the shipped file documents, uncommented, is one the parser takes, with the default it claims.
    @Test func theShippedFilesDocumentedSettingsLoad() throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(
            "../../packaging/config/xign.conf"
        ).path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let uncommented = text.split(separator: "\n", omittingEmptySubsequences: false).map { line in
            line.hasPrefix("#") && line.contains(" = ") && !line.hasPrefix("# ")
                ? String(line.dropFirst()) : String(line)
        }.joined(separator: "\n")
        #expect(try load(uncommented).fingerprintReader == FingerprintReader())
    }

    /// H5: the local groups a host grants: sudo by default, what `[directory] local_groups` lists, never a root
    /// equivalent (below).
    @Test func aHostGrantsSudoByDefaultAndTheGroupsItLists() throws {
        #expect(try load("").grantedLocalGroups == ["sudo"])
        #expect(try load("[directory]\nlocal_groups = sudo, adm\n").grantedLocalGroups == ["sudo", "adm"])
        #expect(try load("[directory]\nlocal_groups =\n").grantedLocalGroups.isEmpty)
    }

    @Test(arguments: [
        ("fprintd_bus = tcp:host=10.0.0.1,port=5555\n", "xign.conf:1: fprintd_bus must be unix:path=/"),
        ("fprintd_bus = unix:path=relative\n", "fprintd_bus must be unix:path=/"),
        ("fingerprint_timeout = 0s\n", "fingerprint_timeout must be"),
        ("fingerprint_timeout = 10m\n", "fingerprint_timeout must be"),
        ("[directory]\nlocal_groups = sudo, disk\n", "may not grant disk, which gives what only root has"),
        ("[directory]\nlocal_groups = root\n", "may not grant root"),
        ("[directory]\nlocal_groups = Sudo\n", "lists local group names, not 'Sudo'"),
        ("[directory]\nkeep = 30m\n", "directory.keep must be"),
    ])
    func aBadFingerprintSettingNamesTheLine(text: String, message: String) {
        do {
            _ = try load(text)
            Issue.record("accepted \(text)")
        } catch {
            #expect("\(error)".contains(message), "\(error)")
        }
    }
}
