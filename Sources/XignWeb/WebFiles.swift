/// The web app's files (Resources/), embedded into the binary by SwiftPM: the script, the stylesheet and the pages'
/// Mustache templates. The device pages are the same for everyone; the console's are rendered with what an
/// administrator may see. Every value is escaped by `{{…}}`, and texts from the manager are set by the script with
/// `textContent`.
enum WebFiles {
    static let script = text(PackageResources.app_js)
    static let stylesheet = text(PackageResources.app_css)
    static let templates: [String: String] = [
        "head": text(PackageResources.head_mustache), "notices": text(PackageResources.notices_mustache),
        "foot": text(PackageResources.foot_mustache), "personalize": text(PackageResources.personalize_mustache),
        "approve": text(PackageResources.approve_mustache), "account": text(PackageResources.account_mustache),
        "console-top": text(PackageResources.console_top_mustache),
        "console-signin": text(PackageResources.console_signin_mustache),
        "console-denied": text(PackageResources.console_denied_mustache),
        "console-accounts": text(PackageResources.console_accounts_mustache),
        "console-account": text(PackageResources.console_account_mustache),
        "console-audit": text(PackageResources.console_audit_mustache),
        "console-hosts": text(PackageResources.console_hosts_mustache),
        "console-health": text(PackageResources.console_health_mustache),
        "console-waiting": text(PackageResources.console_waiting_mustache),
        "notice": text(PackageResources.notice_mustache), "register": text(PackageResources.register_mustache),
        "register-confirm": text(PackageResources.register_confirm_mustache),
        "not-me": text(PackageResources.not_me_mustache),
    ]

    /// Names the script's and the stylesheet's current content in their URLs (`?v=`), so a browser keeps them until
    /// the manager serves another version: FNV-1a of both, a cache key and not a secret.
    static let version: String = {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in PackageResources.app_js + PackageResources.app_css {
            hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
        }
        return String(hash, radix: 16)
    }()

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}
