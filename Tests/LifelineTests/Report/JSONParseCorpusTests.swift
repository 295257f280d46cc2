import Foundation
import LifelineTesting
import Testing

@testable import Lifeline
@testable import LifelineRules

// `JSONValue.parse` (scenarios, config, the store) against documents it did not write: every JSON
// file of the toml-test corpus and the hand-written cases of Tests/json-cases must read as
// Foundation's JSONSerialization reads them, and every text of Tests/json-cases/refused.txt must be
// refused. Tests/LifelineLuaTests/JSONCorpusTests.swift holds lifeline.json's codec to the same cases.

/// Where `value` differs from Foundation's reading `oracle`, or nil when they agree.
private func difference(_ value: JSONValue, _ oracle: Any, at path: String = "$") -> String? {
    switch value {
    case .null:
        return oracle is NSNull ? nil : "\(path): null, expected \(oracle)"
    case .bool(let b):
        return (oracle as? Bool) == b && isBoolean(oracle) ? nil : "\(path): \(b), expected \(oracle)"
    case .int(let i):
        guard let n = oracle as? NSNumber, !isBoolean(oracle), n.doubleValue == Double(i) else {
            return "\(path): \(i), expected \(oracle)"
        }
        return isIntegral(n) && n.int64Value != i ? "\(path): \(i), expected \(n.int64Value)" : nil
    case .number(let text):
        guard let n = oracle as? NSNumber, !isBoolean(oracle), let d = Double(text), n.doubleValue == d else {
            return "\(path): \(text), expected \(oracle)"
        }
        return nil
    case .string(let s):
        return (oracle as? String) == s ? nil : "\(path): \(s.debugDescription), expected \(oracle)"
    case .array(let items):
        guard let expected = oracle as? [Any], expected.count == items.count else {
            return "\(path): array of \(items.count), expected \(oracle)"
        }
        return zip(items, expected).enumerated().lazy.compactMap { difference($1.0, $1.1, at: "\(path)[\($0)]") }.first
    case .object(let fields):
        guard let expected = oracle as? [String: Any], expected.count == fields.count else {
            return "\(path): object with keys \(fields.map(\.0)), expected \(oracle)"
        }
        for (key, field) in fields {
            guard let other = expected[key] else { return "\(path): unexpected key \(key.debugDescription)" }
            if let d = difference(field, other, at: "\(path).\(key)") { return d }
        }
        return nil
    }
}

/// Whether Foundation read `value` as true or false rather than as a number.
private func isBoolean(_ value: Any) -> Bool {
    guard let n = value as? NSNumber else { return false }
    return value is Bool && String(cString: n.objCType) == "c"
}

private func isIntegral(_ n: NSNumber) -> Bool { !["f", "d"].contains(String(cString: n.objCType)) }

/// Foundation's reading of `data`, or nil when it refuses it.
private func oracle(_ data: Data) -> Any? {
    try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
}

@Suite struct JSONParseCorpusTests {
    @Test(.enabled(if: Corpora.tomlTest != nil, Comment(rawValue: Corpora.tomlTestMissing)))
    func everyCorpusDocument_parses_andAgreesWithFoundation() throws {
        let documents = Corpora.jsonDocuments()
        #expect(documents.count >= 200, "found only \(documents.count) documents")
        for (name, data) in documents {
            let text = try #require(String(data: data, encoding: .utf8), "\(name) is not UTF-8")
            let expected = try #require(oracle(data), "Foundation refuses \(name)")
            do {
                let value = try JSONValue.parse(text)
                if let d = difference(value, expected) { Issue.record("\(name): \(d)") }
            } catch {
                Issue.record("\(name): refused: \(error)")
            }
        }
        print("JSONValue.parse: \(documents.count) toml-test documents read as Foundation reads them")
    }

    @Test func everyAcceptedCase_parses_andAgreesWithFoundation() throws {
        let accepted = Corpora.jsonCases("accepted.txt")
        #expect(accepted.count >= 40)
        for (name, bytes) in accepted {
            let text = try #require(String(validating: bytes, as: UTF8.self), "\(name) is not UTF-8")
            let expected = try #require(oracle(Data(bytes)), "Foundation refuses \(name), so the case is wrong")
            do {
                let value = try JSONValue.parse(text)
                if let d = difference(value, expected) { Issue.record("\(name): \(d)") }
            } catch {
                Issue.record("\(name): refused: \(error)")
            }
        }
    }

    /// `parse` takes a String, so a text that is not UTF-8 never reaches it (its callers fail on
    /// reading the file); those cases are the Lua codec's alone.
    @Test func everyRefusedCase_isRefused() throws {
        let refused = Corpora.jsonCases("refused.txt")
        #expect(refused.count >= 150)
        var checked = 0
        for (name, bytes) in refused {
            guard let text = String(validating: bytes, as: UTF8.self) else { continue }
            checked += 1
            if let value = try? JSONValue.parse(text) {
                Issue.record("\(name): accepted as \(value.serialized())")
            }
        }
        print("JSONValue.parse: \(checked) invalid texts refused (\(refused.count - checked) more are not UTF-8)")
    }

    @Test func hundredThousandOpenArrays_areRefusedWithoutOverflowingTheStack() {
        #expect(throws: JSONValue.ParseError.self) { try JSONValue.parse(String(repeating: "[", count: 100_000)) }
    }

    @Test(arguments: ["-01", "+1", "1.", ".5", "2.e3", "01", "\"a\u{01}b\"", "\"tab\there\"", "\"new\nline\""])
    func formerlyAcceptedTexts_areRefusedWithTheirPlace(text: String) {
        #expect {
            try JSONValue.parse(text)
        } throws: { error in
            (error as? JSONValue.ParseError)?.message.contains("at character") == true
        }
    }
}
