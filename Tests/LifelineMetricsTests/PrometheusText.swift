import Foundation

/// A strict reader of the Prometheus text format 0.0.4, for the tests: every line is a `# HELP`,
/// a `# TYPE` or a sample `name{label="value",...} value`; each family has at most one TYPE,
/// given before its samples; every sample belongs to a family with a TYPE (a histogram's
/// `_bucket`, `_sum` and `_count` to theirs); label values are quoted and escaped; a value is a
/// number, `+Inf`, `-Inf` or `NaN`. Anything else throws, with the line.
struct PrometheusText {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Malformed: Error, CustomStringConvertible {
        var line: Int
        var text: String
        var why: String
        var description: String { "line \(line): \(why): \(text)" }
    }

    private(set) var types: [String: String] = [:]
    private(set) var helps: [String: String] = [:]
    private(set) var samples: [Sample] = []

    init(_ page: String) throws {
        guard page.isEmpty || page.hasSuffix("\n") else { throw Malformed(line: 0, text: "", why: "no final newline") }
        for (index, line) in page.split(separator: "\n", omittingEmptySubsequences: false).dropLast().enumerated() {
            let number = index + 1
            func fail(_ why: String) -> Malformed { Malformed(line: number, text: String(line), why: why) }
            if line.hasPrefix("#") {
                let parts = line.split(separator: " ", maxSplits: 3, omittingEmptySubsequences: false)
                guard parts.count >= 3, parts[0] == "#" else { throw fail("a comment that is neither HELP nor TYPE") }
                let name = String(parts[2])
                guard Self.isMetricName(name) else { throw fail("bad family name") }
                switch parts[1] {
                case "TYPE":
                    guard parts.count == 4, ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[3])
                    else { throw fail("bad TYPE") }
                    guard types[name] == nil else { throw fail("a second TYPE for \(name)") }
                    guard !samples.contains(where: { family(of: $0.name) == name }) else {
                        throw fail("TYPE after the family's samples")
                    }
                    types[name] = String(parts[3])
                case "HELP":
                    guard helps[name] == nil else { throw fail("a second HELP for \(name)") }
                    helps[name] = parts.count == 4 ? String(parts[3]) : ""
                default:
                    throw fail("a comment that is neither HELP nor TYPE")
                }
                continue
            }
            samples.append(try Self.sample(line, fail))
            guard family(of: samples.last!.name) != nil else { throw fail("a sample with no TYPE for its family") }
        }
    }

    /// The family a sample's name belongs to, given the TYPE lines so far.
    func family(of name: String) -> String? {
        if types[name] != nil { return name }
        for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) {
            let base = String(name.dropLast(suffix.count))
            if types[base] == "histogram" || types[base] == "summary" { return base }
        }
        return nil
    }

    /// The samples named `name` whose labels include `labels`.
    func values(_ name: String, _ labels: [String: String] = [:]) -> [Double] {
        samples.filter { sample in sample.name == name && labels.allSatisfy { k, v in sample.labels[k] == v } }
            .map(\.value)
    }

    func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        let found = values(name, labels)
        return found.count == 1 ? found[0] : nil
    }

    static func isMetricName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first.isASCIILetter || first == "_" || first == ":" else {
            return false
        }
        return s.unicodeScalars.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == "_" || $0 == ":" }
    }

    static func isLabelName(_ s: String) -> Bool {
        guard let first = s.unicodeScalars.first, first.isASCIILetter || first == "_" else { return false }
        return s.unicodeScalars.allSatisfy { $0.isASCIILetter || $0.isASCIIDigit || $0 == "_" }
    }

    private static func sample(_ line: Substring, _ fail: (String) -> Malformed) throws -> Sample {
        var rest = line[...]
        let nameEnd = rest.firstIndex(where: { $0 == "{" || $0 == " " }) ?? rest.endIndex
        let name = String(rest[..<nameEnd])
        guard isMetricName(name) else { throw fail("bad metric name") }
        rest = rest[nameEnd...]
        var labels: [String: String] = [:]
        if rest.first == "{" {
            rest = rest.dropFirst()
            while rest.first != "}" {
                guard let eq = rest.firstIndex(of: "=") else { throw fail("a label with no '='") }
                let label = String(rest[..<eq])
                guard isLabelName(label), labels[label] == nil else { throw fail("bad or repeated label name") }
                rest = rest[rest.index(after: eq)...]
                guard rest.first == "\"" else { throw fail("an unquoted label value") }
                rest = rest.dropFirst()
                var value = ""
                while true {
                    guard let c = rest.first else { throw fail("an unterminated label value") }
                    rest = rest.dropFirst()
                    if c == "\"" { break }
                    if c == "\\" {
                        guard let e = rest.first else { throw fail("a dangling escape") }
                        rest = rest.dropFirst()
                        switch e {
                        case "\\": value.append("\\")
                        case "\"": value.append("\"")
                        case "n": value.append("\n")
                        default: throw fail("a bad escape")
                        }
                    } else {
                        guard c != "\n" else { throw fail("a newline in a label value") }
                        value.append(c)
                    }
                }
                labels[label] = value
                if rest.first == "," {
                    rest = rest.dropFirst()
                } else if rest.first != "}" {
                    throw fail("no ',' or '}'")
                }
            }
            rest = rest.dropFirst()
        }
        guard rest.first == " " else { throw fail("no space before the value") }
        let fields = rest.dropFirst().split(separator: " ", omittingEmptySubsequences: false)
        guard fields.count == 1 || (fields.count == 2 && Int64(fields[1]) != nil) else {
            throw fail("bad value or timestamp")
        }
        let text = String(fields[0])
        let value: Double
        switch text {
        case "+Inf": value = .infinity
        case "-Inf": value = -.infinity
        case "NaN": value = .nan
        default:
            guard text.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }), let v = Double(text) else {
                throw fail("a value that is not a number")
            }
            value = v
        }
        return Sample(name: name, labels: labels, value: value)
    }
}

extension Unicode.Scalar {
    fileprivate var isASCIILetter: Bool { ("a"..."z").contains(self) || ("A"..."Z").contains(self) }
    fileprivate var isASCIIDigit: Bool { ("0"..."9").contains(self) }
}
