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

/// Draws `payload` as a QR code fitted to the terminal, with `besideLines` left for what follows; when it cannot
/// fit, says so and goes on (the link is printed too).
func drawQR(_ payload: String, style: QRStyle, caption: String?, besideLines: Int) {
    do {
        let text = try QRRenderer.render(
            payload, style: style, columns: Terminal.columns() ?? 80, rows: Terminal.rows(), besideLines: besideLines)
        if let caption { print(caption) }
        print(text, terminator: "")
    } catch {
        Terminal.write("(QR code not shown: \(error))\n")
    }
}

/// `print` for text that quotes the manager or what it wrote into the state: no control characters (DisplayText).
func printSanitized(_ text: String) {
    print(DisplayText.sanitized(text))
}

/// Prints text or JSON for a command's result.
struct Output {
    let json: Bool

    func say(_ text: String) {
        if !json { printSanitized(text) }
    }

    func emit(_ fields: [String: JSONValue]) {
        guard json else { return }
        let encoder = JSONEncoder.canonical
        encoder.outputFormatting.insert(.prettyPrinted)
        print(String(decoding: (try? encoder.encode(fields)) ?? Data("{}".utf8), as: UTF8.self))
    }
}

enum JSONValue: Encodable {
    case string(String)
    case bool(Bool)
    case int(Int)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        case .null: try container.encodeNil()
        }
    }
}
