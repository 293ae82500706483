import FoundationEssentials
import XignProtocol

#if canImport(Glibc)
import Glibc
#endif

extension XignSdk {
    /// How old the directory cache may be before doctor says xignd is not refreshing it (its default is 5 minutes).
    static let staleDirectoryMilliseconds: Int64 = 30 * 60 * 1000

    /// On a joined host: libnss_xign in nsswitch.conf, the homes' and the account phase's PAM lines, and a cache xignd
    /// keeps fresh.
    func checkDirectory(pamDirectory: String, nsswitch: String, directory: String) -> [Diagnosis.Item] {
        var items: [Diagnosis.Item] = []
        let lines =
            (try? AtomicFile.read(nsswitch, limit: 256 * 1024)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        let missing = ["passwd", "group"].filter { database in
            !lines.split(separator: "\n").contains { line in
                let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
                return words.first == "\(database):" && words.dropFirst().contains("xign")
            }
        }
        items.append(
            missing.isEmpty
                ? .init(name: "nsswitch", status: .ok, detail: "passwd and group ask xign", hint: nil)
                : .init(
                    name: "nsswitch", status: .warning,
                    detail:
                        "\(missing.joined(separator: " and ")) in \(nsswitch) do not ask xign: the manager's users are not users here",
                    hint: "install libnss-xign, or add xign last to the passwd and group lines"))
        let session = (try? AtomicFile.read(pamDirectory + "/common-session", limit: 256 * 1024)).map {
            String(decoding: $0, as: UTF8.self)
        }
        items.append(
            session?.contains("pam_mkhomedir.so") == true
                ? .init(name: "homes", status: .ok, detail: "common-session makes a missing home", hint: nil)
                : .init(
                    name: "homes", status: .warning,
                    detail: "no pam_mkhomedir in \(pamDirectory)/common-session: a first login finds no home",
                    hint: "sudo pam-auth-update --enable xign-homes"))
        let services = ((try? Self.directoryEntries(pamDirectory)) ?? []).compactMap { name in
            (try? AtomicFile.read(pamDirectory + "/" + name, limit: 64 * 1024)).map {
                (name: name, text: String(decoding: $0, as: UTF8.self))
            }
        }
        items.append(Diagnosis.accountPhase(in: services))
        let path = directory + "/" + DirectoryFiles.passwd
        var status = stat()
        guard stat(path, &status) == 0 else {
            items.append(
                .init(
                    name: "directory", status: .warning, detail: "xignd has written no directory in \(directory)",
                    hint: "sudo systemctl enable --now xignd.service"))
            return items
        }
        let served = DirectoryFiles.served(in: directory)
        let age = Date().millisecondsSince1970 - Int64(status.st_mtim.tv_sec) * 1000
        if status.st_uid != 0 || status.st_mode & 0o022 != 0 {
            items.append(
                .init(
                    name: "directory", status: .failure,
                    detail: "\(path) is not root's or others may write it: libnss_xign ignores it",
                    hint: "sudo chown root: \(path) && sudo chmod 0644 \(path)"))
        } else if age > Self.staleDirectoryMilliseconds {
            items.append(
                .init(
                    name: "directory", status: .warning,
                    detail: "\(served.count) users, last refreshed \(age / 60_000) minutes ago",
                    hint: "is xignd running? sudo systemctl enable --now xignd.service; its log says why"))
        } else {
            items.append(
                .init(
                    name: "directory", status: .ok,
                    detail: "\(served.count) users, refreshed \(age / 1000) s ago", hint: nil))
        }
        return items
    }
}
