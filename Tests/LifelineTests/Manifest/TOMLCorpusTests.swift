import Foundation
import LifelineTesting
import Testing

@testable import Lifeline
@testable import LifelineRules

// The hand-written TOML reader against the TOML 1.0.0 cases of toml-test (tests/files-toml-1.0.0):
// every valid case reads exactly as its tagged .json says, or, when it uses a feature plugin.toml
// does not support, fails with "not supported" at file:line, and docs/lua-api.md lists it under that
// feature; every invalid case is refused at file:line.

private let corpus = Corpora.tomlTest

private let corpusMissing = Comment(rawValue: Corpora.tomlTestMissing)

/// The TOML 1.0.0 cases whose path starts with `kind` ("valid/" or "invalid/"), without ".toml".
private func cases(_ kind: String) -> [String] {
    guard let corpus,
        let list = try? String(
            contentsOf: corpus.appendingPathComponent("tests/files-toml-1.0.0"), encoding: .utf8)
    else { return [] }
    return list.split(separator: "\n").map(String.init)
        .filter { $0.hasPrefix(kind) && $0.hasSuffix(".toml") }.map { String($0.dropLast(5)) }
}

private func data(_ name: String, _ ext: String) throws -> Data {
    try Data(contentsOf: corpus!.appendingPathComponent("tests/\(name).\(ext)"))
}

/// How reading case `name` went, read from its bytes as the plugin loader reads plugin.toml.
private enum Outcome {
    case parsed(TOMLTable)
    case notUTF8(String)
    case refused(String)
}

private func read(_ name: String) throws -> Outcome {
    let bytes = try data(name, "toml")
    do {
        return .parsed(try TOML.parse(utf8: bytes, fileName: "\(name).toml"))
    } catch {
        return String(validating: bytes, as: UTF8.self) == nil ? .notUTF8(error.message) : .refused(error.message)
    }
}

/// The features the reader refuses, keyed by the words of their message, with their name in the docs.
private let unsupportedFeatures = [("dates are not supported", "Dates and times")]

/// Whether `message` is "NAME.toml:LINE: ..." with a line the file has.
private func pointsAtALine(_ message: String, of name: String, lines: Int) -> Bool {
    let prefix = "\(name).toml:"
    guard message.hasPrefix(prefix) else { return false }
    let rest = message.dropFirst(prefix.count)
    guard let colon = rest.firstIndex(of: ":"), let line = Int(rest[..<colon]) else { return false }
    return (1...max(lines, 1)).contains(line) && rest[colon...].hasPrefix(": ")
}

private func lineCount(_ name: String) throws -> Int {
    try data(name, "toml").reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
}

/// Where `value` differs from toml-test's tagged `expected`, or nil when it is the same.
private func difference(_ value: TOMLValue, _ expected: Any, at path: String) -> String? {
    if let tagged = expected as? [String: Any], tagged.count == 2, let type = tagged["type"] as? String,
        let text = tagged["value"] as? String
    {
        let same: Bool
        switch (type, value) {
        case ("string", .string(let s)): same = s == text
        case ("integer", .integer(let i)): same = Int64(text) == i
        case ("bool", .bool(let b)): same = text == String(b)
        case ("float", .float(let d)):
            let e = ["inf": .infinity, "+inf": .infinity, "-inf": -.infinity, "nan": .nan, "+nan": .nan, "-nan": .nan][
                text] ?? Double(text)
            same = e.map { e in e.isNaN ? d.isNaN : e == d && e.sign == d.sign } ?? false
        default: same = false
        }
        return same ? nil : "\(path): \(value), expected \(type) \(text.debugDescription)"
    }
    switch value {
    case .array(let items):
        guard let expected = expected as? [Any], expected.count == items.count else {
            return "\(path): array of \(items.count), expected \(expected)"
        }
        return zip(items, expected).enumerated().lazy.compactMap { difference($1.0, $1.1, at: "\(path)[\($0)]") }.first
    case .table(let table): return difference(table, expected, at: path)
    default: return "\(path): \(value), expected \(expected)"
    }
}

private func difference(_ table: TOMLTable, _ expected: Any, at path: String) -> String? {
    guard let expected = expected as? [String: Any] else { return "\(path): a table, expected \(expected)" }
    guard Set(table.keys) == Set(expected.keys), table.keys.count == expected.count else {
        return "\(path): keys \(table.keys.sorted()), expected \(expected.keys.sorted())"
    }
    for (key, value, _) in table.entries {
        if let d = difference(value, expected[key]!, at: "\(path).\(key)") { return d }
    }
    return nil
}

/// The cases docs/lua-api.md lists under each unsupported feature: the backquoted `valid/...` names of
/// the bullet that starts with the feature's name in bold.
private func documentedUnsupportedCases() throws -> [String: Set<String>] {
    let docs = try String(contentsOf: Corpora.repository.appendingPathComponent("docs/lua-api.md"), encoding: .utf8)
    var listed: [String: Set<String>] = [:]
    var feature: String?
    for line in docs.split(separator: "\n", omittingEmptySubsequences: false) {
        if line.hasPrefix("- ") || line.trimmingCharacters(in: .whitespaces).isEmpty {
            feature = unsupportedFeatures.map(\.1).first { line.hasPrefix("- **\($0)**") }
        }
        guard let feature else { continue }
        for match in line.matches(of: /`(valid\/[^`]+)`/) { listed[feature, default: []].insert(String(match.1)) }
    }
    return listed
}

@Suite struct TOMLCorpusTests {
    @Test(.enabled(if: corpus != nil, corpusMissing))
    func everyValidCase_readsAsExpected_orFailsAsNotSupportedAtItsLine() throws {
        let valid = cases("valid/")
        #expect(valid.count == 210, "files-toml-1.0.0 lists \(valid.count) valid cases")
        var passed = 0
        var unsupported: [String: Set<String>] = [:]
        for name in valid {
            switch try read(name) {
            case .notUTF8: Issue.record("\(name): the loader would refuse it as not UTF-8")
            case .refused(let message):
                guard let feature = unsupportedFeatures.first(where: { message.contains($0.0) })?.1 else {
                    Issue.record("\(name): refused: \(message)")
                    continue
                }
                #expect(message.contains("not supported"), "\(name): \(message)")
                #expect(pointsAtALine(message, of: name, lines: try lineCount(name)), "\(name): \(message)")
                unsupported[feature, default: []].insert(name)
            case .parsed(let table):
                let expected = try JSONSerialization.jsonObject(with: try data(name, "json"))
                if let d = difference(table, expected, at: "$") { Issue.record("\(name): \(d)") } else { passed += 1 }
            }
        }
        #expect(try documentedUnsupportedCases() == unsupported, "docs/lua-api.md lists other unsupported cases")
        let byFeature = unsupportedFeatures.map { "\($0.1.lowercased()) \(unsupported[$0.1]?.count ?? 0)" }
        print("toml-test 1.0.0 valid: \(passed) read exactly, unsupported: \(byFeature.joined(separator: ", "))")
    }

    @Test(.enabled(if: corpus != nil, corpusMissing))
    func everyInvalidCase_isRefusedAtALineOfTheFile() throws {
        let invalid = cases("invalid/")
        #expect(invalid.count == 499, "files-toml-1.0.0 lists \(invalid.count) invalid cases")
        var refused = 0, notUTF8 = 0, asUnsupported = 0
        for name in invalid {
            switch try read(name) {
            case .notUTF8(let message):
                #expect(pointsAtALine(message, of: name, lines: try lineCount(name)), "\(name): \(message)")
                notUTF8 += 1
            case .parsed: Issue.record("\(name): accepted")
            case .refused(let message):
                #expect(pointsAtALine(message, of: name, lines: try lineCount(name)), "\(name): \(message)")
                refused += 1
                if message.contains("not supported") { asUnsupported += 1 }
            }
        }
        print("toml-test 1.0.0 invalid: \(refused + notUTF8) of \(invalid.count) refused (\(notUTF8) as not UTF-8 "
            + "by the loader, \(asUnsupported) by an unsupported feature, the rest as TOML errors)")
    }
}
