import ArgumentParser
import FoundationEssentials
import XignCore
import XignLogin
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

/// `xign-setup approve`: confirm (or deny) a login that a server asks for, with this machine's enrolment.
struct Approve: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Approve or deny a login to a server that asks you to confirm it.",
        discussion: """
            Without PAYLOAD, approves the oldest login waiting for your account (--wait waits for one). PAYLOAD is the
            XIGN://C/… text of the server's QR code, or its link. You type the code the server shows, then your PIN.
            Without a terminal, give the code and then the PIN as lines on --pin-stdin or --pin-fd. Run without root, it
            asks xignd, which approves only with the enrolments of your own user.
            """
    )

    @OptionGroup var common: CommonOptions
    @OptionGroup var pins: PinSource
    @Option(help: "The local user whose enrolment approves (default: you).") var user: String?
    @Flag(help: "Wait up to --wait-seconds for a login to arrive.") var wait = false
    @Option(help: "How long --wait waits.") var waitSeconds = 60
    @Flag(help: "Refuse the login instead of approving it.") var deny = false
    @Option(help: "xignd's socket, which approves for you when you are not root.") var xigndSocket = DaemonConnection
        .defaultSocketPath
    @Argument(help: "The server's QR code text (XIGN://C/…) or link.") var payload: String?

    func validate() throws {
        guard (1...600).contains(waitSeconds) else { throw ValidationError("--wait-seconds must be 1 to 600") }
    }

    func run() throws {
        try reportingErrors(json: common.json) { try approve(Output(json: common.json)) }
    }

    private func approve(_ output: Output) throws {
        let approver = try common.approver(user: user, xigndSocket: xigndSocket)
        let wanted = try payload.map { text -> String in
            guard let id = ConfirmationPayload.confirmationId(in: text) else {
                throw XignSdkError(
                    .invalidInput, "that is not a login confirmation (it looks like XIGN://C/… or the server's link)")
            }
            return id
        }
        let waiting = try find(wanted, approver: approver)
        guard !waiting.isEmpty else {
            throw XignSdkError(
                .sessionExpired,
                wanted == nil
                    ? "no login is waiting for your approval\(wait ? " (waited \(waitSeconds) s)" : ""); start it on the server, or use --wait"
                    : "that login is not waiting for your approval (decided, expired, or for another account)")
        }
        let confirmation = try choose(from: waiting)
        output.say("Login asked at \(confirmation.createdAt.localDescription): \(Self.describe(confirmation)).")
        if deny {
            try approver.deny(confirmation)
            output.say("Denied.")
            output.emit([
                "status": .string("denied"), "confirmationId": .string(confirmation.confirmationId),
                "host": .string(confirmation.host),
            ])
            return
        }
        let code = try readCode(host: confirmation.host)
        switch try approver.approve(confirmation, code: code, pin: try pins.read("PIN: ")) {
        case .approved(let loginName, let relyingPartyName):
            output.say("Approved: \(loginName) may log in to \(relyingPartyName).")
            output.emit([
                "status": .string("approved"), "confirmationId": .string(confirmation.confirmationId),
                "host": .string(relyingPartyName),
                "loginName": .string(loginName),
            ])
        case .lockout(let lock):
            Terminal.write("The login was not approved.\n")
            throw reportLockout(lock, output: output)
        }
    }

    /// The confirmations to choose from: the one named, or all waiting (for one to arrive, up to --wait-seconds with --wait).
    private func find(_ wanted: String?, approver: any LoginApprover) throws -> [PendingConfirmation] {
        let deadline = MonotonicClock.now().advanced(by: Int64(wait ? waitSeconds : 0) * 1000)
        repeat {
            let remaining = Int(deadline.milliseconds - MonotonicClock.now().milliseconds)
            let found = try approver.pendingConfirmations(waitMilliseconds: wanted == nil ? max(0, remaining) : 0)
                .filter { wanted == nil || $0.confirmationId == wanted }
            if !found.isEmpty { return found }
        } while wanted == nil && MonotonicClock.now() < deadline
        return []
    }

    /// One confirmation: the only one, or the one the user picks at a terminal. A script names it with PAYLOAD.
    private func choose(from waiting: [PendingConfirmation]) throws -> PendingConfirmation {
        guard waiting.count > 1 else { return waiting[0] }
        guard pins.descriptor == nil, Terminal.isInteractive else {
            throw XignSdkError(
                .invalidInput,
                "\(waiting.count) logins wait for your approval; pass the link or QR text of the one you started")
        }
        for (index, confirmation) in waiting.enumerated() {
            Terminal.write("\(index + 1). \(Self.describe(confirmation))\n")
        }
        while true {
            let answer = (try? Terminal.ask("Which login did you start (1–\(waiting.count))? ")) ?? ""
            if let number = Int(answer), waiting.indices.contains(number - 1) { return waiting[number - 1] }
        }
    }

    static func describe(_ confirmation: PendingConfirmation) -> String {
        var text = "\(confirmation.service) on \(confirmation.host) as \(confirmation.loginName)"
        if let remote = confirmation.remoteHost { text += " from \(remote)" }
        if let tty = confirmation.tty { text += " (\(tty))" }
        return text
    }

    /// The code the server shows: asked at a terminal, else the first line of the PIN source.
    private func readCode(host: String) throws -> String {
        let text: String
        do {
            if let descriptor = pins.descriptor {
                text = try Terminal.readLine(from: descriptor, limit: 64)
            } else {
                guard Terminal.isInteractive else {
                    throw XignSdkError(
                        .invalidInput, "no terminal to ask for the code; pass --pin-stdin with the code and the PIN")
                }
                text = try Terminal.ask("Code shown on \(host): ")
            }
        } catch let error as Terminal.InputError {
            throw XignSdkError(.invalidInput, "cannot read the code: \(error)")
        }
        let code = text.filter { !$0.isWhitespace }
        guard code.count == 6, code.allSatisfy(\.isASCII), code.allSatisfy(\.isNumber) else {
            throw XignSdkError(.invalidInput, "the code has 6 digits, as the server shows it")
        }
        return code
    }
}
