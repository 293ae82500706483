import Foundation
import XignCrypto
import Yams

/// Checks real answers against docs/openapi.yaml: the subset of JSON Schema the spec uses.
struct OpenAPIValidator {
    let document: [String: Any]

    init(path: String) throws {
        guard let document = try Yams.load(yaml: String(contentsOfFile: path, encoding: .utf8)) as? [String: Any] else {
            throw ValidationFailure("\(path) is not a YAML mapping")
        }
        self.document = document
    }

    static func repositoryFile(_ relative: String) -> String {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.path + "/Package.swift") { return url.path + "/" + relative }
        }
        return relative
    }

    struct ValidationFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// Throws with every mismatch between the answer and the documented response.
    func validate(path: String, method: String, status: Int, contentType: String?, body: Data) throws {
        guard let paths = document["paths"] as? [String: Any], let item = paths[path] as? [String: Any],
            let operation = item[method.lowercased()] as? [String: Any],
            let responses = operation["responses"] as? [String: Any]
        else {
            throw ValidationFailure("\(method) \(path) is not in the spec")
        }
        guard var response = responses[String(status)] as? [String: Any] else {
            throw ValidationFailure("\(method) \(path) answered \(status), which the spec does not list")
        }
        if let ref = response["$ref"] as? String { response = try resolve(ref) }
        guard let content = response["content"] as? [String: Any] else { return }
        let type = contentType?.split(separator: ";").first.map(String.init) ?? ""
        guard let media = content[type] as? [String: Any], let schema = media["schema"] else {
            throw ValidationFailure("\(method) \(path) \(status): content type '\(type)' is not documented")
        }
        var problems: [String] = []
        if type == "application/jose" {
            let compact = String(decoding: body, as: UTF8.self)
            check(.string(compact), against: schema, at: "$", &problems)
            let parts = compact.split(separator: ".")
            if let signed = media["x-xign-signed-payload"], parts.count == 3,
                let payload = Base64URL.decode(String(parts[1]))
            {
                check(try JSONDecoder().decode(JSON.self, from: payload), against: signed, at: "$payload", &problems)
            } else {
                problems.append("$: not a JWS with a decodable payload")
            }
        } else {
            check(try JSONDecoder().decode(JSON.self, from: body), against: schema, at: "$", &problems)
        }
        if !problems.isEmpty {
            throw ValidationFailure("\(method) \(path) \(status):\n  " + problems.joined(separator: "\n  "))
        }
    }

    private func resolve(_ ref: String) throws -> [String: Any] {
        var node: Any = document
        for part in ref.dropFirst(2).split(separator: "/") {
            guard let next = (node as? [String: Any])?[String(part)] else {
                throw ValidationFailure("unresolved \(ref)")
            }
            node = next
        }
        guard let resolved = node as? [String: Any] else { throw ValidationFailure("\(ref) is not a mapping") }
        return resolved
    }

    private func check(_ value: JSON, against rawSchema: Any, at path: String, _ problems: inout [String]) {
        guard var schema = rawSchema as? [String: Any] else { return }
        if let ref = schema["$ref"] as? String {
            guard let resolved = try? resolve(ref) else { return problems.append("\(path): unresolved \(ref)") }
            schema = resolved
        }
        if let allowed = schema["enum"] as? [Any], case .string(let text) = value,
            !allowed.contains(where: { "\($0)" == text })
        {
            problems.append("\(path): '\(text)' is not one of \(allowed)")
        }
        switch (schema["type"] as? String, value) {
        case ("object", .object(let object)):
            for key in schema["required"] as? [String] ?? [] where object[key] == nil {
                problems.append("\(path): missing '\(key)'")
            }
            let properties = schema["properties"] as? [String: Any] ?? [:]
            for (key, member) in object {
                if let propertySchema = properties[key] {
                    check(member, against: propertySchema, at: "\(path).\(key)", &problems)
                } else if let additional = schema["additionalProperties"] {
                    if additional as? Bool == false {
                        problems.append("\(path): unexpected property '\(key)'")
                    } else {
                        check(member, against: additional, at: "\(path).\(key)", &problems)
                    }
                }
            }
        case ("array", .array(let array)):
            if let min = schema["minItems"] as? Int, array.count < min {
                problems.append("\(path): fewer than \(min) items")
            }
            if let max = schema["maxItems"] as? Int, array.count > max {
                problems.append("\(path): more than \(max) items")
            }
            if let items = schema["items"] {
                for (index, item) in array.enumerated() {
                    check(item, against: items, at: "\(path)[\(index)]", &problems)
                }
            }
        case ("string", .string(let string)):
            if let min = schema["minLength"] as? Int, string.count < min {
                problems.append("\(path): shorter than \(min)")
            }
            if let max = schema["maxLength"] as? Int, string.count > max {
                problems.append("\(path): longer than \(max)")
            }
            if let pattern = schema["pattern"] as? String, string.range(of: pattern, options: .regularExpression) == nil
            {
                problems.append("\(path): '\(string.prefix(60))' does not match \(pattern)")
            }
        case ("integer", .number(let number)):
            if number != number.rounded() { problems.append("\(path): \(number) is not an integer") }
            if let min = schema["minimum"] as? Int, number < Double(min) { problems.append("\(path): below \(min)") }
            if let max = schema["maximum"] as? Int, number > Double(max) { problems.append("\(path): above \(max)") }
        case ("boolean", .bool):
            break
        case (nil, _):
            break
        case (let type?, _):
            problems.append("\(path): expected \(type), found \(value)")
        }
    }
}

/// A JSON value decoded strictly: a boolean is never a number and a number never a boolean.
enum JSON: Decodable, CustomStringConvertible {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON].self))
        }
    }

    var description: String {
        switch self {
        case .null: return "null"
        case .bool(let value): return "boolean \(value)"
        case .number(let value): return "number \(value)"
        case .string(let value): return "string '\(value.prefix(40))'"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}
