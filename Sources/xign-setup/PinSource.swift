import ArgumentParser
import FoundationEssentials
import XignCore
import XignDevice
import XignLogin
import XignProtocol
import XignTerminal

#if canImport(Glibc)
import Glibc
#endif

/// Where a non-interactive PIN comes from: never argv, never the environment.
struct PinSource: ParsableArguments {
    @Flag(help: "Read PINs from standard input, one per line, instead of prompting.")
    var pinStdin = false

    @Option(help: "Read PINs from this open file descriptor, one per line.")
    var pinFd: Int32?

    var descriptor: Int32? { pinFd ?? (pinStdin ? STDIN_FILENO : nil) }

    func validate() throws {
        if pinStdin && pinFd != nil { throw ValidationError("use either --pin-stdin or --pin-fd") }
        if let pinFd, pinFd < 0 { throw ValidationError("--pin-fd needs a file descriptor number") }
    }

    /// Asks for a new PIN until `spec` accepts it; at a terminal the PIN is typed twice.
    func choose(_ spec: PinSpecification, prompt: String, interactive: Bool) throws {
        while true {
            let pin = try read("\(prompt) (\(spec.minLength)–\(spec.maxLength) digits): ")
            let result = spec.setPin(pin)
            if result == .valid {
                guard interactive else { return }
                if try read("Repeat the PIN: ") == pin { return }
                spec.setPin("")
                Terminal.write("The PINs differ.\n")
                continue
            }
            guard interactive else { throw XignSdkError(.pinPolicyViolation, spec.explain(result)) }
            Terminal.write(spec.explain(result) + "\n")
        }
    }

    /// The next PIN: a line from the descriptor, or a prompt with echo off.
    func read(_ prompt: String) throws -> String {
        do {
            if let descriptor { return try Terminal.readLine(from: descriptor, limit: 128) }
            guard Terminal.isInteractive else {
                throw XignSdkError(.invalidInput, "no terminal to ask for the PIN; pass --pin-stdin or --pin-fd N")
            }
            return try Terminal.askSecret(prompt)
        } catch let error as Terminal.InputError {
            throw XignSdkError(.invalidInput, "cannot read the PIN: \(error)")
        }
    }
}
