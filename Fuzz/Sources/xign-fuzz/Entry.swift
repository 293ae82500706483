import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The target XIGN_FUZZ_TARGET names; `make fuzz` runs this binary once per target, each with its own corpus.
nonisolated(unsafe) let selected: FuzzTarget = {
    let name = getenv("XIGN_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget.all.first(where: { $0.name == name }) else {
        FileHandle.standardError.write(
            Data("set XIGN_FUZZ_TARGET to one of: \(FuzzTarget.all.map(\.name).joined(separator: " "))\n".utf8))
        exit(2)
    }
    return target
}()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzOneInput(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    selected.run(Data(bytes: data, count: size))
    return 0
}

@_silgen_name("LLVMFuzzerRunDriver")
func runFuzzerDriver(
    _ argc: UnsafeMutablePointer<CInt>,
    _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
    _ callback: @convention(c) (UnsafePointer<UInt8>, Int) -> CInt
) -> CInt

/// SwiftPM names an executable's entry point after the product and links `main` to it; libFuzzer's driver runs here.
@_cdecl("xign_fuzz_main")
public func fuzzMain(_ argc: CInt, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> CInt {
    // Choose before libFuzzer starts, so a missing or unknown target is a usage error and not a "crash" on input one.
    _ = selected
    var count = argc
    var arguments = argv
    return runFuzzerDriver(&count, &arguments) { data, size in fuzzOneInput(data, size) }
}
