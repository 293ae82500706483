import ArgumentParser
import Foundation
import XignCore
import XignLogin
import XignProtocol
import XignTerminal

/// `xign-setup agent`: the desktop side of login confirmation, run by the `xign-agent` user unit. It waits for
/// logins that ask for the user's approval (through xignd) and shows each once as a desktop notification
/// (org.freedesktop.Notifications, through notify-send); choosing it opens the approval, which asks for the code
/// shown on the server and the PIN. The code is not in the notification: typing it is what proves the user
/// started that login.
struct Agent: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show a desktop notification for each login that waits for your approval.",
        discussion: "Runs until stopped; the xign-agent user unit starts it with the desktop session."
    )

    @OptionGroup var common: CommonOptions
    @Option(help: "The local user whose enrolments approve (default: you).") var user: String?
    @Option(help: "xignd's socket, which approves for you when you are not root.") var xigndSocket = DaemonConnection
        .defaultSocketPath
    @Option(help: "The command that opens an approval; the login's XIGN://C/… text is added as its last argument.")
    var open = "x-terminal-emulator -e xign-setup approve"
    @Option(help: "The notification command (libnotify's notify-send).") var notifySend = "/usr/bin/notify-send"

    /// The manager holds a wait for new logins at most this long.
    static let waitMilliseconds = 25_000

    func run() throws {
        let approver = try common.approver(user: user, xigndSocket: xigndSocket)
        var shown = Set<String>()
        while true {
            let waiting: [PendingConfirmation]
            do { waiting = try approver.pendingConfirmations(waitMilliseconds: Self.waitMilliseconds) } catch let error
                as XignSdkError
            {
                // xignd restarting, the manager away, no enrolment yet: say so and try again later.
                Terminal.write("xign-agent: \(error.message)\n")
                sleep(error.errorCode == .identityManagerNotFound ? 60 : 10)
                continue
            }
            for confirmation in waiting where !shown.contains(confirmation.confirmationId) { notify(confirmation) }
            // Decided and expired logins leave the list, and the set with them.
            shown = Set(waiting.map(\.confirmationId))
            // With a login pending the manager answers at once; do not ask it in a tight loop.
            if !waiting.isEmpty { sleep(2) }
        }
    }

    /// One notification; its action opens the approval. notify-send waits for the choice on a thread of its own.
    private func notify(_ confirmation: PendingConfirmation) {
        let who = Self.plain(confirmation.loginName), host = Self.plain(confirmation.host)
        var body = "\(who) wants to log in to \(host) (\(Self.plain(confirmation.service)))"
        if let remote = confirmation.remoteHost { body += " from \(Self.plain(remote))" }
        body += ". Approve it with the code the server shows, and your PIN."
        let notification = [
            notifySend, "--app-name=XignIn", "--urgency=critical", "--icon=dialog-password", "--expire-time=90000",
            "--action=default=Approve", "--wait", "Approve a login to \(host)?", body,
        ]
        let opener =
            open.split(separator: " ").map(String.init) + [ConfirmationPayload.prefix + confirmation.confirmationId]
        Thread.detachNewThread {
            guard Self.output(of: notification)?.trimmingCharacters(in: .whitespacesAndNewlines) == "default" else {
                return
            }
            _ = Self.output(of: opener)
        }
    }

    /// Runs `command` (no shell) and returns what it printed, or nil when it cannot run.
    static func output(of command: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0].hasPrefix("/") ? command[0] : "/usr/bin/env")
        process.arguments = command[0].hasPrefix("/") ? Array(command.dropFirst()) : command
        let pipe = Pipe()
        process.standardOutput = pipe
        do { try process.run() } catch {
            Terminal.write("xign-agent: cannot run \(command[0]): \(error)\n")
            return nil
        }
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return String(decoding: data.prefix(4096), as: UTF8.self)
    }

    /// Server text for a notification body, which servers may read as markup: no control characters, no markup.
    static func plain(_ text: String) -> String {
        String(DisplayText.sanitized(text, keepingLineFeeds: false).prefix(200))
            .replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }
}
