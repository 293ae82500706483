import Foundation

/// Where the desktop tests leave their pictures, for people to look at: `.build-desktop/artifacts` in the checkout.
public enum DesktopArtifacts {
    public static let directory =
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().path
        + "/.build-desktop/artifacts"

    /// The path for the picture `name` (such as "swaylock-wrong-pin.png"), its directory made.
    public static func path(_ name: String) throws -> String {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        return directory + "/" + name
    }
}
