import Foundation

/// The test corpora: the toml-test corpus beside the repository, and the hand-written JSON cases
/// of Tests/json-cases, which the core's JSON parser and Lua's codec are both held to.
public enum Corpora {
    /// The repository, found from this file (Sources/LifelineTesting/Corpora.swift).
    public static let repository = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// The toml-test corpus: LIFELINE_TOML_TEST, or `shared/toml-test` beside the repository; nil
    /// when it is not there (the tests that need it say so and are skipped).
    public static let tomlTest: URL? = {
        let url =
            ProcessInfo.processInfo.environment["LIFELINE_TOML_TEST"].map { URL(fileURLWithPath: $0) }
            ?? repository.deletingLastPathComponent().appendingPathComponent("shared/toml-test")
        return FileManager.default.fileExists(atPath: url.appendingPathComponent("tests/files-toml-1.0.0").path)
            ? url : nil
    }()

    /// Why a corpus test is skipped.
    public static let tomlTestMissing = "the toml-test corpus is not at ../shared/toml-test; set LIFELINE_TOML_TEST"

    /// Every .json file of the toml-test corpus: the expected values of its valid cases, real
    /// documents that no Lifeline code wrote.
    public static func jsonDocuments() -> [(name: String, data: Data)] {
        guard let tests = tomlTest?.appendingPathComponent("tests"),
            let walker = FileManager.default.enumerator(atPath: tests.path)
        else { return [] }
        return walker.compactMap { $0 as? String }.filter { $0.hasSuffix(".json") }.sorted().compactMap { name in
            (try? Data(contentsOf: tests.appendingPathComponent(name))).map { (name, $0) }
        }
    }

    /// The cases of Tests/json-cases/`file`: `name: input` lines, with `\xHH` for the byte HH.
    public static func jsonCases(_ file: String) -> [(name: String, bytes: [UInt8])] {
        let path = repository.appendingPathComponent("Tests/json-cases/\(file)")
        guard let text = try? String(contentsOf: path, encoding: .utf8) else { return [] }
        return text.split(separator: "\n").compactMap { line in
            guard !line.hasPrefix("#"), let colon = line.firstIndex(of: ":") else { return nil }
            var input = Array(line[line.index(after: colon)...].utf8)
            if input.first == UInt8(ascii: " ") { input.removeFirst() }
            var bytes: [UInt8] = []
            var k = 0
            while k < input.count {
                if input[k] == UInt8(ascii: "\\"), k + 3 < input.count, input[k + 1] == UInt8(ascii: "x"),
                    let byte = UInt8(String(decoding: input[(k + 2)...(k + 3)], as: UTF8.self), radix: 16)
                {
                    bytes.append(byte)
                    k += 4
                } else {
                    bytes.append(input[k])
                    k += 1
                }
            }
            return (String(line[..<colon]), bytes)
        }
    }
}
