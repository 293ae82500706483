/// Names no account of the manager takes as its login name and no host serves (docs/security.md, H5). An account
/// holding one would be taken for that user, or, being a group of its name too, make a package's postinst skip making
/// that group (`getent group docker || addgroup docker`) and give the account's holder what the group guards:
/// - the users and groups of Debian's base-passwd (12 and 13) and of systemd;
/// - groups packages make for access to something (docker, lxd, libvirt, kvm, wireshark …);
/// - the first users cloud images and boards make (ubuntu, debian, ec2-user, pi, vagrant …);
/// - anything starting with `systemd-` or `_` (Debian's names for daemons).
/// A host adds the names its sysusers.d declares (xignd's `HostReservedNames`).
public enum ReservedNames {
    public static func contains(_ name: String) -> Bool {
        names.contains(name) || name.hasPrefix("systemd-") || name.hasPrefix("_")
    }

    static let names: Set<String> = basePasswd.union(packages).union(firstUsers)

    static let basePasswd: Set<String> = [
        "root", "daemon", "bin", "sys", "sync", "games", "man", "lp", "mail", "news", "uucp", "proxy", "www-data",
        "backup", "list", "irc", "gnats", "nobody", "nogroup", "adm", "tty", "disk", "kmem", "dialout", "fax", "voice",
        "cdrom", "floppy", "tape", "sudo", "audio", "dip", "operator", "src", "shadow", "utmp", "video", "sasl",
        "plugdev", "staff", "users", "input", "sgx", "kvm", "render", "clock", "messagebus", "halt", "shutdown",
    ]

    static let packages: Set<String> = [
        "admin", "wheel", "docker", "lxd", "incus", "incus-admin", "libvirt", "libvirt-qemu", "libvirt-dnsmasq",
        "lpadmin", "sambashare", "bluetooth", "netdev", "crontab", "ssh", "sshd", "ssl-cert", "tss", "avahi", "colord",
        "geoclue", "pulse", "pulse-access", "rtkit", "saned", "scanner", "gdm", "Debian-gdm", "lightdm", "sddm",
        "postgres", "mysql", "redis", "nginx", "polkitd", "ntp", "ntpsec", "chrony", "dnsmasq", "tcpdump", "wireshark",
        "vboxusers", "xign-manager", "uuidd", "statd", "usbmux", "cups-pk-helper", "fwupd-refresh",
    ]

    static let firstUsers: Set<String> = [
        "ubuntu", "debian", "ec2-user", "centos", "fedora", "rocky", "almalinux", "cloud-user", "azureuser", "opc",
        "core", "alpine", "arch", "pi", "vagrant", "user", "guest",
    ]
}
