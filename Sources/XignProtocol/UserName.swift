/// Unix user names are bytes. Swift's `==` on strings takes canonically equivalent spellings (é as one
/// scalar, or e and a combining accent) as equal, which the system's user database does not, so names
/// are compared here byte for byte.
public enum UserName {
    public static func same(_ name: String, _ other: String) -> Bool {
        name.utf8.elementsEqual(other.utf8)
    }
}
