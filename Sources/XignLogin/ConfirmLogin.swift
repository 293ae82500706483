import FoundationEssentials
import XignCore
import XignProtocol
import XignTerminal

/// `mode=confirm`: this machine is a host that holds no key of the user's. The manager asks the user's enrolled
/// device to approve; the host shows its name, the code, the link and a QR code, and waits for the signed decision.
struct ConfirmLogin {
    /// The terminal a QR code must fit with `qr=auto`: neither libpam nor sshd tells the module the real size.
    static let terminalColumns = 80, terminalRows = 24

    let login: Login
    let sdk: XignSdk

    func run() throws -> LoginOutcome {
        let caller = login.caller
        let started = MonotonicClock.now()
        let pending = try sdk.startLoginConfirmation(
            loginName: caller.user, service: caller.service ?? "pam", remoteHost: caller.rhost, tty: caller.tty,
            command: nil, localUid: LocalUser(named: caller.user).map { Int64($0.uid) })
        let deadline = min(pending.expiresAt, started.advanced(by: Int64(login.options.totalTimeoutSeconds) * 1000))
        login.debug("confirmation \(pending.confirmationId) for \(caller.user) on host \(pending.hostName)")
        let instructions =
            if login.options.qr == .text, let page = ConfirmationPayload.accountPage(of: pending.appLink) {
                ["XignIn: approve this login at \(page) with the code \(pending.code)"]
            } else {
                [
                    "XignIn: approve this login to \(pending.hostName) on an enrolled device:",
                    "  xign-setup approve   (or scan the code, or open \(pending.appLink))",
                    "  and type the code \(pending.code)",
                ]
            }
        let text =
            (qrCode(pending.payload, besideLines: instructions.count + 2) ?? "") + instructions.joined(separator: "\n")
        let decision: LoginConfirmationDecision
        do {
            decision = try waitForDecision(
                pending, text: text, inPrompt: login.dialogue.showsTextOnlyWithPrompts, until: deadline)
        } catch {
            // The client went away or the manager failed mid-wait: nobody should approve this login any more.
            sdk.withdraw(pending)
            throw error
        }
        switch decision {
        case .approved(let device):
            login.debug("confirmation \(pending.confirmationId) approved by device \(device)")
            login.onApproval?(pending.confirmationId)
            return .confirmed
        case .denied(.wrongCodes):
            login.tell(
                "XignIn: the login was refused: the code was typed wrong too often on the approving device. Log in again.",
                isError: true)
            return .refused(.denied)
        case .denied(.denied):
            login.tell("XignIn: the login was denied on your device.", isError: true)
            return .refused(.denied)
        case .expired, .pending:
            sdk.withdraw(pending)
            login.tell("XignIn: the approval did not arrive in time; log in again.", isError: true)
            return .refused(.expired)
        }
    }

    /// Waits for the decision until `deadline`: by itself, (under sshd) each time the user presses Enter, or (at
    /// GNOME's own greeter) each time the person presses Done under the greeter's own QR code.
    private func waitForDecision(
        _ pending: PendingLoginConfirmation, text: String, inPrompt: Bool, until deadline: MonotonicClock.Instant
    ) throws -> LoginConfirmationDecision {
        if login.dialogue.selection != nil { return try waitAtGNOMEsGreeter(pending, until: deadline) }
        if !inPrompt { try login.show(text, isError: false) }
        var prompt = text + "\nPress Enter once approved: "
        while MonotonicClock.now() < deadline {
            if inPrompt {
                _ = try login.ask(prompt, echo: true)
                prompt = "XignIn: not approved yet (code \(pending.code)). Press Enter once approved: "
            }
            let remaining = Int(deadline.milliseconds - MonotonicClock.now().milliseconds)
            // After Enter the approval is usually there already; a short wait covers the last round trip.
            let decision = try sdk.waitForDecision(pending, upTo: inPrompt ? min(remaining, 3_000) : remaining)
            if decision != .pending { return decision }
        }
        return .expired
    }

    /// The greeter draws the link as a QR code with the code, and the person presses Done once approved. "Not yet"
    /// is said inside the same conversation with the same approval again: the greeter shows it under a new Log In
    /// button. Its timeout and back button end the conversation, and the caller withdraws the confirmation.
    private func waitAtGNOMEsGreeter(
        _ pending: PendingLoginConfirmation, until deadline: MonotonicClock.Instant
    ) throws -> LoginConfirmationDecision {
        while MonotonicClock.now() < deadline {
            let seconds = Int((deadline.milliseconds - MonotonicClock.now().milliseconds + 999) / 1000)
            _ = try login.dialogue.select(
                AuthSelection.approval(uri: pending.appLink, code: pending.code, timeout: seconds))
            let remaining = Int(deadline.milliseconds - MonotonicClock.now().milliseconds)
            let decision = try sdk.waitForDecision(pending, upTo: max(0, min(remaining, 3_000)))
            if decision != .pending { return decision }
            try login.show(
                "XignIn: not approved yet. Approve the login on your device (code \(pending.code)), then press Done.",
                isError: true)
        }
        return .expired
    }

    /// The QR code as text with a line after it, or nil where `qr=` says no or it would not fit 80×24 beside `lines`.
    private func qrCode(_ payload: String, besideLines lines: Int) -> String? {
        guard login.options.qr == .auto || login.options.qr == .always else { return nil }
        return try? QRRenderer.render(
            payload, style: .utf8, columns: Self.terminalColumns,
            rows: login.options.qr == .always ? nil : Self.terminalRows, besideLines: lines)
    }
}
