import Foundation
import XignProtocol

/// The names a host serves no account under, beside the manager's own list (`ReservedNames`): the users and groups
/// this host's sysusers.d declares, which systemd or a package makes when it needs them, perhaps after the directory
/// served an account of that name (docs/security.md, H5). Lines `u NAME …` and `g NAME …` name one, `m USER GROUP`
/// two; files are read from /usr/lib, /run and /etc, at most 64 KiB each.
enum HostReservedNames {
    static let directories = ["/usr/lib/sysusers.d", "/run/sysusers.d", "/etc/sysusers.d"]

    static func load(from directories: [String] = directories) -> Set<String> {
        var names = Set<String>()
        for directory in directories {
            let files = (try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []
            for file in files where file.hasSuffix(".conf") {
                guard let data = try? AtomicFile.read(directory + "/" + file, limit: 64 * 1024) else { continue }
                names.formUnion(declared(in: String(decoding: data, as: UTF8.self)))
            }
        }
        return names
    }

    static func declared(in text: String) -> [String] {
        text.split(separator: "\n").flatMap { line -> [String] in
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard let kind = fields.first, fields.count >= 2 else { return [] }
            switch kind {
            case "u", "u!", "g": return [String(fields[1])]
            case "m": return fields.count >= 3 ? [String(fields[1]), String(fields[2])] : [String(fields[1])]
            default: return []
            }
        }
    }
}
