import FoundationEssentials

extension Diagnosis {
    /// The methods sshd can complete without PAM's auth phase, or with one secret fed to every prompt: each is a way
    /// past pam_xign's approval. keyboard-interactive is the one that runs the PAM conversation.
    static let methodsPastTheApproval: [(method: String, setting: String)] = [
        ("publickey", "pubkeyauthentication"), ("password", "passwordauthentication"),
        ("hostbased", "hostbasedauthentication"), ("gssapi-with-mic", "gssapiauthentication"),
    ]

    /// sshd's effective configuration (`sshd -T`): whether every way in over SSH meets pam_xign's approval.
    public static func sshd(effectiveConfiguration text: String) -> Item {
        var settings: [String: String] = [:]
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { settings[parts[0].lowercased()] = String(parts[1]) }
        }
        guard settings["usepam"] == "yes" else {
            return Item(
                name: "sshd", status: .failure, detail: "UsePAM is not yes: pam_xign never runs for SSH logins",
                hint: "set UsePAM yes in /etc/ssh/sshd_config")
        }
        var enabled = Dictionary(
            uniqueKeysWithValues: methodsPastTheApproval.map { ($0.method, settings[$0.setting] == "yes") })
        enabled["keyboard-interactive"] = settings["kbdinteractiveauthentication"] == "yes"
        let configured = settings["authenticationmethods"] ?? "any"
        // Each list is a way in: every method of it, in turn. A list whose method is off cannot be completed.
        let lists: [[String]] =
            configured == "any"
            ? enabled.filter(\.value).keys.sorted().map { [$0] }
            : configured.split(separator: " ").map { list in
                list.split(separator: ",").map { String($0.split(separator: ":").first ?? $0) }
            }
        let past = lists.filter { list in
            !list.contains("keyboard-interactive") && list.allSatisfy { enabled[$0] ?? false }
        }
        guard past.isEmpty else {
            return Item(
                name: "sshd", status: .warning,
                detail:
                    "\(past.map { $0.joined(separator: ",") }.joined(separator: " or ")) logs in without pam_xign's approval (AuthenticationMethods \(configured))",
                hint:
                    "set AuthenticationMethods publickey,keyboard-interactive (the key, then the approval) or keyboard-interactive, and PasswordAuthentication no, in /etc/ssh/sshd_config"
            )
        }
        return Item(
            name: "sshd", status: .ok,
            detail: "every way in asks pam_xign (AuthenticationMethods \(configured))", hint: nil)
    }

    /// sudo's settings (`sudo -V` as root): a timestamp that outlives the sudo lets the next ones past the approval.
    public static func sudo(settings text: String) -> Item {
        let prefix = "Authentication timestamp timeout: "
        guard let line = text.split(separator: "\n").first(where: { $0.hasPrefix(prefix) }),
            let minutes = Double(line.dropFirst(prefix.count).split(separator: " ").first ?? "")
        else {
            return Item(
                name: "sudo timestamp", status: .warning, detail: "sudo -V did not tell its timestamp timeout",
                hint: "check that Defaults timestamp_timeout=0 is in /etc/sudoers.d/xign")
        }
        guard minutes == 0 else {
            return Item(
                name: "sudo timestamp", status: .warning,
                detail:
                    "sudo lets a sudo in the next \(line.dropFirst(prefix.count)) after one through without asking pam_xign",
                hint:
                    "add Defaults timestamp_timeout=0 to /etc/sudoers.d/xign (visudo -f); an approved SSH session covers its sudos where a host group's sudo policy is session"
            )
        }
        return Item(name: "sudo timestamp", status: .ok, detail: "every sudo asks pam_xign", hint: nil)
    }

    /// A PAM service line of the account phase with pam_xign in `files` (name and text): without one, a lock at the
    /// manager does not stop a login that never meets the auth phase.
    static func accountPhase(in files: [(name: String, text: String)]) -> Item {
        let lines = files.flatMap { file in
            file.text.split(separator: "\n").filter { line in
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                return words.first == "account" && line.contains("pam_xign.so")
            }.map { "\(file.name): \($0.trimmingPrefix(while: \.isWhitespace))" }
        }
        guard lines.isEmpty else {
            return Item(name: "account phase", status: .ok, detail: lines.joined(separator: "; "), hint: nil)
        }
        return Item(
            name: "account phase", status: .warning,
            detail:
                "no account line with pam_xign.so: a lock or removal at the manager does not stop an SSH key, su from root or cron here",
            hint:
                "sudo pam-auth-update --enable xign, or add `account required pam_xign.so` to /etc/pam.d/common-account"
        )
    }
}
