import Foundation

/// Chromium driven by `Browser/browser.py` (selenium), with Chrome's virtual authenticator as the passkey store: what a
/// phone user does on the manager's pages. The profile keeps the browser's storage and the passkeys between steps.
public struct Browser: Sendable {
    public let profile: String
    /// Where each step's screenshot at phone size goes; `XIGN_SCREENSHOTS` names a directory to keep them in.
    public let screenshots: String
    /// Passkeys made from now on are synced ones (backup eligible and backed up).
    public var synced = false
    private let directory: TemporaryDirectory

    /// What the page showed: the status and error lines and the fields the step read.
    public struct Page: @unchecked Sendable, CustomStringConvertible {
        public let fields: [String: Any]
        public var error: String { fields["error"] as? String ?? "" }
        public var status: String { fields["status"] as? String ?? "" }
        public subscript(field: String) -> String { fields[field] as? String ?? "" }
        /// A list the step read, such as the devices or the waiting logins.
        public func list(_ field: String) -> [String] { fields[field] as? [String] ?? [] }
        public var screenshots: [String] { fields["screenshots"] as? [String] ?? [] }
        public var description: String { "\(fields)" }
    }

    /// `keptIn`: a directory that keeps the screenshots after the test (its artifacts), in place of a temporary one.
    public init(in directory: TemporaryDirectory, name: String = "phone", keptIn: String? = nil) {
        self.directory = directory
        profile = directory.file("browser-\(name)")
        let kept = keptIn ?? ProcessInfo.processInfo.environment["XIGN_SCREENSHOTS"].map { "\($0)/\(name)" }
        screenshots = kept ?? directory.file("screenshots-\(name)")
    }

    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path

    /// Runs one step; `input` goes to its stdin (PINs and codes never go into argv).
    public func run(_ command: String, _ url: String, input: String = "") throws -> Page {
        try page(of: try start(command, url, input: input).wait(timeout: 90), command)
    }

    private func start(_ command: String, _ url: String, input: String = "") throws -> ChildProcess {
        let python = Self.repository + "/.build-browser/venv/bin/python"
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw TestFailure(
                "selenium is not set up; run `make test` (or bash Tests/XignTestSupport/Browser/setup.sh)")
        }
        var arguments = [
            Self.repository + "/Tests/XignTestSupport/Browser/browser.py", "--profile", profile, "--screenshots",
            screenshots,
        ]
        if synced { arguments.append("--synced") }
        return try ChildProcess(python, arguments + [command, url], stdin: input, in: directory)
    }

    /// The page a step reported: its last line of output, a JSON object.
    private func page(of result: ChildProcess.Result, _ command: String) throws -> Page {
        guard result.status == 0, let data = result.stdout.split(separator: "\n").last.map({ Data($0.utf8) }),
            let fields = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        else {
            throw TestFailure(
                "browser.py \(command) exited \(result.status): \(result.stdout.suffix(400)) \(result.stderr.suffix(2000))"
            )
        }
        return Page(fields: fields)
    }

    /// Opens the activation link, types the activation PIN, and makes a passkey.
    public func personalize(_ link: String, pin: String) throws -> Page {
        try run("personalize", link, input: pin + "\n")
    }
    /// Opens a login link, types the code and the PIN, and approves.
    public func approve(_ link: String, code: String, pin: String) throws -> Page {
        try run("approve", link, input: "\(code)\n\(pin)\n")
    }
    public func deny(_ link: String) throws -> Page { try run("deny", link) }
    /// Approves the login at `link`, then opens `next` in the same tab.
    public func approveThenOpen(_ link: String, code: String, pin: String, next: String) throws -> Page {
        try run("follow", link, input: "\(code)\n\(pin)\n\(next)\n")
    }
    /// Signs in on the account page at `url`, opens the first login that waits there and approves it.
    public func approveWaiting(at url: String, code: String, pin: String) throws -> Page {
        try run("approve-waiting", url, input: "\(code)\n\(pin)\n")
    }
    /// Signs in on the account page at `url` (the manager's `/account`).
    public func account(_ url: String) throws -> Page { try run("account", url) }
    public func revoke(_ deviceName: String, at url: String, pin: String) throws -> Page {
        try run("revoke", url, input: "\(deviceName)\n\(pin)\n")
    }
    public func changePIN(at url: String, from current: String, to new: String) throws -> Page {
        try run("change-pin", url, input: "\(current)\n\(new)\n")
    }

    /// Signs in on the account page and waits there: `whileOpen` runs once the page is signed in, and the page must
    /// then show a waiting login by itself.
    public func waitForLogins(at url: String, whileOpen: () async throws -> Void) async throws -> Page {
        let ready = profile + "/ready"
        try? FileManager.default.removeItem(atPath: ready)
        let child = try start("inbox", url)
        guard waitUntil(seconds: 30, { FileManager.default.fileExists(atPath: ready) || child.poll() != nil }),
            child.poll() == nil
        else {
            throw TestFailure("the account page did not sign in: \(try child.wait().stdout)")
        }
        try await whileOpen()
        return try page(of: try child.wait(timeout: 60), "inbox")
    }

    public func view(_ link: String) throws -> Page { try run("view", link) }

    /// Signs in to the console at `url` (the manager's `/console`) with the PIN.
    public func consoleSignIn(_ url: String, pin: String) throws -> Page {
        try run("console-signin", url, input: pin + "\n")
    }
    /// Finds `email` from the console's account list at `url`, opens it and presses the button of `action`.
    public func consoleAct(_ action: String, on email: String, at url: String) throws -> Page {
        try run("console-act", url, input: "\(email)\n\(action)\n")
    }
    /// Fills the console's form for `action` on the page at `url` with `fields` (element id and value) and submits it.
    public func consoleForm(_ action: String, _ fields: KeyValuePairs<String, String>, at url: String) throws -> Page {
        try run(
            "console-form", url,
            input: ([action] + fields.map { "\($0.key)=\($0.value)" }).joined(separator: "\n") + "\n")
    }
    /// Opens each of `paths` under `origin` at phone and desktop size, with a screenshot of each.
    public func consolePages(_ paths: [String], at origin: String) throws -> Page {
        try run("console-pages", origin, input: paths.joined(separator: "\n") + "\n")
    }
    /// Chooses the PIN on the manager's registration page at `url` and goes on to the identity provider.
    public func registerThroughProvider(_ url: String, pin: String) throws -> Page {
        try run("register-provider", url, input: pin + "\n")
    }
    /// Opens `location`, where the identity provider sends the browser back, and answers the page that asks for the
    /// registration's code with each of `answers` in turn (a code, or "not mine"); `attempts` holds what each showed.
    public func confirmRegistration(_ location: String, answers: [String]) throws -> Page {
        try run("confirm-registration", location, input: answers.map { $0 + "\n" }.joined())
    }
    /// A list of records the step read, such as the pages it opened.
    public func records(_ page: Page, _ field: String) -> [[String: Any]] {
        page.fields[field] as? [[String: Any]] ?? []
    }

    /// An assertion over `challenge` (base64url) by the passkey `credentialId`, asked for by a page at `url`, which may
    /// be of any origin: what a page of another site could obtain.
    public func assertion(at url: String, challenge: String, rpId: String, credentialId: String) throws -> Page {
        let request = try JSONSerialization.data(withJSONObject: [
            "challenge": challenge, "rpId": rpId, "credentialId": credentialId,
        ])
        return try run("assert", url, input: String(decoding: request, as: UTF8.self) + "\n")
    }
}
