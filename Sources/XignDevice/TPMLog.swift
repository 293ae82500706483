#if canImport(Glibc)
import Glibc
#endif

/// libtss2 writes its own errors to stderr, where they garble a terminal and a journal, before our callers can say the
/// same with what to do. Each program that may use the TPM calls `quiet()` once at start, before any thread and before
/// the library is first opened (xign_tpm.c opens it then); a TSS2_LOG the administrator set on purpose wins.
/// pam_xign may not change its host's environment: it runs with an environment of its own that holds `setting`
/// (pam_xign.c).
public enum TPMLog {
    public static let setting = "all+none"

    public static func quiet() { setenv("TSS2_LOG", setting, 0) }
}
