import CPAM
import FoundationEssentials
import XignCore
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

/// `mode=confirm`: this machine is a host that holds no key of the user's. The manager asks the user's enrolled
/// device to approve; the module shows the host, the code, the link and a QR code, and waits for the signed decision.
extension PAMLogin {
    /// The terminal a QR code must fit with `qr=auto`: neither libpam nor sshd tells the module the real size.
    static let terminalColumns = 80, terminalRows = 24

    func confirm(sdk: XignSdk) throws -> (Int32, String) {
        let started = MonotonicClock.now()
        let pending = try sdk.startLoginConfirmation(
            loginName: caller.user, service: caller.service ?? "pam", remoteHost: caller.rhost, tty: caller.tty, command: nil)
        let deadline = min(pending.expiresAt, started.advanced(by: Int64(options.totalTimeoutSeconds) * 1000))
        debug("confirmation \(pending.confirmationId) for \(caller.user) on host \(pending.hostName)")
        let instructions = [
            "XignIn: approve this login to \(pending.hostName) on an enrolled device:",
            "  xign-setup approve   (or scan the code, or open \(pending.appLink))",
            "  and type the code \(pending.code)",
        ]
        let text = (qrCode(pending.payload, besideLines: instructions.count + 2) ?? "") + instructions.joined(separator: "\n")
        let waitsInPrompt = showsTextOnlyWithPrompts
        let decision: LoginConfirmationDecision
        do {
            decision = try waitForDecision(pending, sdk: sdk, text: text, inPrompt: waitsInPrompt, until: deadline)
        } catch {
            // The client went away or the manager failed mid-wait: nobody should approve this login any more.
            sdk.withdraw(pending)
            throw error
        }
        switch decision {
        case .approved(let device):
            debug("confirmation \(pending.confirmationId) approved by device \(device)")
            return (PAM_SUCCESS, "confirmed")
        case .denied:
            tell("XignIn: the login was denied on your device.", isError: true)
            return (PAM_AUTH_ERR, "denied")
        case .expired, .pending:
            sdk.withdraw(pending)
            tell("XignIn: the approval did not arrive in time; log in again.", isError: true)
            return (PAM_AUTH_ERR, "expired")
        }
    }

    /// Waits for the decision until `deadline`: by itself, or (under sshd) each time the user presses Enter.
    private func waitForDecision(
        _ pending: PendingLoginConfirmation, sdk: XignSdk, text: String, inPrompt: Bool,
        until deadline: MonotonicClock.Instant
    ) throws -> LoginConfirmationDecision {
        if !inPrompt { try show(text, isError: false) }
        var prompt = text + "\nPress Enter once approved: "
        while MonotonicClock.now() < deadline {
            if inPrompt {
                _ = try ask(prompt, echo: true)
                prompt = "XignIn: not approved yet (code \(pending.code)). Press Enter once approved: "
            }
            let remaining = Int(deadline.milliseconds - MonotonicClock.now().milliseconds)
            // After Enter the approval is usually there already; a short wait covers the last round trip.
            let decision = try sdk.waitForDecision(pending, upTo: inPrompt ? min(remaining, 3_000) : remaining)
            if decision != .pending { return decision }
        }
        return .expired
    }

    /// The QR code as text with a line after it, or nil where `qr=` says no or it would not fit 80×24 beside `lines`.
    func qrCode(_ payload: String, besideLines lines: Int) -> String? {
        guard options.qr != .never else { return nil }
        return try? QRRenderer.render(
            payload, style: .utf8, columns: Self.terminalColumns, rows: options.qr == .always ? nil : Self.terminalRows, besideLines: lines)
    }
}
