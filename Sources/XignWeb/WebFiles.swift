/// The web app's files (Resources/), embedded into the binary by SwiftPM: the script, the stylesheet and the pages'
/// Mustache templates. The pages are the same for everyone, so nothing personal is rendered on the server: every
/// value is escaped by `{{…}}`, and texts from the manager are set by the script with `textContent`.
enum WebFiles {
    static let script = text(PackageResources.app_js)
    static let stylesheet = text(PackageResources.app_css)
    static let templates: [String: String] = [
        "head": text(PackageResources.head_mustache), "notices": text(PackageResources.notices_mustache),
        "foot": text(PackageResources.foot_mustache), "personalize": text(PackageResources.personalize_mustache),
        "approve": text(PackageResources.approve_mustache), "account": text(PackageResources.account_mustache),
    ]

    private static func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }
}
