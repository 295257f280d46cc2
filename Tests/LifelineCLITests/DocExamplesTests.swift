import Foundation
import Testing

// The examples in README.md and docs/*.md, run against the real binary, so that a doc example
// cannot drift from what the product does. Each Markdown file is one test; a failure names the
// file and the line of the block's opening fence.
//
// What a fenced block's info string means (docs/testing.md, "Examples in these docs are tested"):
//
//   ```lua file=PATH, ```toml file=PATH, ```scenario file=PATH (any language with file=)
//       The block is written to PATH inside the Markdown file's working folder, in document
//       order (a later block may overwrite an earlier one). The working folder starts with a
//       copy of the repository's plugins/ folder.
//   ```lua without file=
//       A fragment. It must compile with the real Lua: it becomes the init.lua
//       `return function(...) BLOCK end` of a plugin, and `lifeline check` must say `ok` for it.
//       Nothing in it runs. (A plugin with file= is run by the commands that load it.)
//   ```scenario
//       Written to a temporary file and run with `lifeline simulate` on the bundled plugins (so a
//       `uses` line can name one of them): it must not be a scenario error (exit 65). ```scenario error is an example of a bad
//       scenario: it must be exit 65. A scenario with file= gets the same check.
//   ```console, ```sh
//       Each line starting with `$ ` is a command, run with bash in the working folder, with
//       `lifeline` meaning the binary under test (a link on PATH). The lines after it, up to the
//       next `$ ` line, are its expected output: stdout then stderr, blank lines dropped, with
//       durations like `(0.24 s)` and clock stamps like `[    1.950s]` made neutral. Every line
//       must match in order, and a line `...` (indented or not) matches any number of lines;
//       a command shown without output has its output unchecked. A command must exit 0 unless
//       the next command is `$ echo $?`, whose output line is the exit code expected. A command
//       ending in `\` goes on on the next line.
//       ```console norun: not run (a live server, signals, a build, a process that runs until
//       stopped).
//   ```json
//       Must parse as JSON, unless it has a `...` line (a trimmed report).
//   Anything else (```swift, ```text, ```toml without file=, a bare ```): not run.

/// One fenced block of a Markdown file.
struct DocBlock {
    var language: String
    var attributes: [String: String]
    var flags: Set<String>
    /// The line of the opening fence, counting from 1.
    var line: Int
    var lines: [String]

    var text: String { lines.map { $0 + "\n" }.joined() }
}

enum DocExamples {
    /// README.md and every docs/*.md, relative to the package root.
    static var markdownFiles: [String] {
        let docs = (try? FileManager.default.contentsOfDirectory(atPath: CLI.packageRoot + "/docs")) ?? []
        return ["README.md"] + docs.filter { $0.hasSuffix(".md") }.sorted().map { "docs/" + $0 }
    }

    static func blocks(of markdown: String) -> [DocBlock] {
        var result: [DocBlock] = []
        var open: (block: DocBlock, indent: Int)?
        for (index, raw) in markdown.components(separatedBy: "\n").enumerated() {
            let indent = raw.prefix { $0 == " " }.count
            let trimmed = raw.dropFirst(indent)
            if var current = open {
                if trimmed.trimmingCharacters(in: .whitespaces) == "```" {
                    result.append(current.block)
                    open = nil
                } else {
                    var line = Substring(raw)
                    let strip = min(current.indent, line.prefix { $0 == " " }.count)
                    line = line.dropFirst(strip)
                    current.block.lines.append(String(line))
                    open = current
                }
            } else if trimmed.hasPrefix("```") {
                let words = trimmed.dropFirst(3).split(separator: " ").map(String.init)
                var attributes: [String: String] = [:]
                var flags: Set<String> = []
                for word in words.dropFirst() {
                    if let eq = word.firstIndex(of: "=") {
                        attributes[String(word[..<eq])] = String(word[word.index(after: eq)...])
                    } else {
                        flags.insert(word)
                    }
                }
                open = (DocBlock(language: words.first ?? "", attributes: attributes, flags: flags,
                                 line: index + 1, lines: []), indent)
            }
        }
        return result
    }

    /// Durations and clock stamps vary from run to run.
    static func normalize(_ line: String) -> String {
        var s = line
        s = s.replacing(try! Regex(#"\(\d+(\.\d+)? s\)"#), with: "(TIME s)")
        s = s.replacing(try! Regex(#"\[ *\d+\.\d+s\]"#), with: "[TIME]")
        while s.last?.isWhitespace == true { s.removeLast() }
        return s
    }

    /// Whether `actual` matches `expected` line for line, `...` matching any number of lines.
    static func matches(_ expected: ArraySlice<String>, _ actual: ArraySlice<String>) -> Bool {
        guard let first = expected.first else { return actual.isEmpty }
        if first.trimmingCharacters(in: .whitespaces) == "..." {
            for skip in 0...actual.count where matches(expected.dropFirst(), actual.dropFirst(skip)) {
                return true
            }
            return false
        }
        guard let head = actual.first, head == first else { return false }
        return matches(expected.dropFirst(), actual.dropFirst())
    }

    struct Run {
        var status: Int32
        var stdout: String
        var stderr: String
        var timedOut: Bool
    }

    /// Runs `command` with bash in `directory`, `bin` first on PATH; stops it after 60 s.
    static func bash(_ command: String, in directory: String, bin: String) throws -> Run {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = ["-c", command]
        var environment = ProcessInfo.processInfo.environment
        environment["PATH"] = bin + ":" + (environment["PATH"] ?? "/usr/bin:/bin")
        environment["NO_COLOR"] = "1"
        environment["COLUMNS"] = "100"
        process.environment = environment
        process.currentDirectoryURL = URL(fileURLWithPath: directory)
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let outData = Captured(out), errData = Captured(err)
        let deadline = Date().addingTimeInterval(60)
        var timedOut = false
        while process.isRunning {
            if Date() > deadline {
                timedOut = true
                process.terminate()
                break
            }
            usleep(5_000)
        }
        process.waitUntilExit()
        return Run(status: process.terminationStatus, stdout: outData.text(waitingForEOF: true),
                   stderr: errData.text(waitingForEOF: true), timedOut: timedOut)
    }

    /// A console block's commands, each with its expected output lines.
    static func commands(of block: DocBlock) -> [(command: String, expected: [String])] {
        var result: [(command: String, expected: [String])] = []
        var continuing = false
        for line in block.lines {
            if continuing, var last = result.popLast() {
                last.command += "\n" + line  // bash reads the backslash-newline as a space
                continuing = line.hasSuffix("\\")
                result.append(last)
            } else if line.hasPrefix("$ ") {
                result.append((String(line.dropFirst(2)), []))
                continuing = line.hasSuffix("\\")
            } else if var last = result.popLast() {
                last.expected.append(line)
                result.append(last)
            }
        }
        return result
    }

    static func lines(_ text: String) -> [String] {
        text.components(separatedBy: "\n").map(normalize).filter { !$0.isEmpty }
    }
}

@Suite struct DocExamplesTests {
    @Test(arguments: DocExamples.markdownFiles)
    func examplesHold(_ file: String) throws {
        let fm = FileManager.default
        let markdown = try String(contentsOfFile: CLI.packageRoot + "/" + file, encoding: .utf8)
        let blocks = DocExamples.blocks(of: markdown)

        let root = fm.temporaryDirectory.appendingPathComponent("lifeline-docs-\(UUID().uuidString)").path
        defer { try? fm.removeItem(atPath: root) }
        let work = root + "/work", bin = root + "/bin", fragments = root + "/fragments",
            scenarios = root + "/scenarios"
        for dir in [work, bin, fragments, scenarios] {
            try fm.createDirectory(atPath: dir, withIntermediateDirectories: true)
        }
        try fm.copyItem(atPath: CLI.packageRoot + "/plugins", toPath: work + "/plugins")
        let binary = URL(fileURLWithPath: CLI.binary, relativeTo: URL(fileURLWithPath: fm.currentDirectoryPath)).path
        try fm.createSymbolicLink(atPath: bin + "/lifeline", withDestinationPath: binary)

        func fail(_ block: DocBlock, _ message: String) {
            Issue.record("\(file):\(block.line): \(message)")
        }

        var luaFragments: [String: DocBlock] = [:]
        for block in blocks {
            if let path = block.attributes["file"] {
                let target = work + "/" + path
                try fm.createDirectory(atPath: (target as NSString).deletingLastPathComponent,
                                       withIntermediateDirectories: true)
                try block.text.write(toFile: target, atomically: true, encoding: .utf8)
            }
            switch block.language {
            case "lua" where block.attributes["file"] == nil:
                let name = "block-\(block.line)"
                try fm.createDirectory(atPath: fragments + "/" + name, withIntermediateDirectories: true)
                try ("return function(...)\n" + block.text + "end\n")
                    .write(toFile: fragments + "/" + name + "/init.lua", atomically: true, encoding: .utf8)
                luaFragments[name] = block

            case "scenario":
                let path = scenarios + "/line-\(block.line).scenario"
                try block.text.write(toFile: path, atomically: true, encoding: .utf8)
                let r = try DocExamples.bash(
                    "lifeline simulate --plugins \(CLI.packageRoot)/plugins --scenario \(path)", in: work, bin: bin)
                if block.flags.contains("error") {
                    if r.status != 65 { fail(block, "a bad scenario's example, but simulate exited \(r.status), not 65\n\(r.stderr)") }
                } else if r.status == 65 {
                    fail(block, "the scenario does not read (exit 65):\n\(r.stderr)")
                }

            case "console", "sh":
                if block.flags.contains("norun") { continue }
                var previous: Int32 = 0
                let commands = DocExamples.commands(of: block)
                for (index, step) in commands.enumerated() {
                    if step.command.trimmingCharacters(in: .whitespaces) == "echo $?" {
                        let shown = step.expected.first?.trimmingCharacters(in: .whitespaces) ?? ""
                        if shown != "\(previous)" { fail(block, "exit code \(previous), the block shows \(shown)") }
                        continue
                    }
                    let r = try DocExamples.bash(step.command, in: work, bin: bin)
                    previous = r.status
                    if r.timedOut { fail(block, "`\(step.command)` ran past 60 s and was stopped") }
                    let checked = index + 1 < commands.count
                        && commands[index + 1].command.trimmingCharacters(in: .whitespaces) == "echo $?"
                    if !checked && r.status != 0 {
                        fail(block, "`\(step.command)` exited \(r.status)\n\(r.stdout)\(r.stderr)")
                    }
                    let expected = DocExamples.lines(step.expected.joined(separator: "\n"))
                    guard !expected.isEmpty else { continue }
                    let actual = DocExamples.lines(r.stdout) + DocExamples.lines(r.stderr)
                    if !DocExamples.matches(expected[...], actual[...]) {
                        fail(block, "`\(step.command)` printed other lines than the block shows.\n"
                             + "shown:\n\(expected.joined(separator: "\n"))\n"
                             + "printed (stdout, then stderr):\n\(actual.joined(separator: "\n"))")
                    }
                }

            case "json":
                if block.lines.contains(where: { $0.trimmingCharacters(in: .whitespaces) == "..." }) { continue }
                do {
                    _ = try JSONSerialization.jsonObject(with: Data(block.text.utf8))
                } catch {
                    fail(block, "not JSON: \(error)")
                }

            default:
                break
            }
        }

        if !luaFragments.isEmpty {
            let r = try DocExamples.bash("lifeline check --plugins \(fragments)", in: work, bin: bin)
            for (name, block) in luaFragments {
                let verdict = (r.stdout + r.stderr).components(separatedBy: "\n")
                    .first { $0.hasPrefix("ok   \(name) ") || $0.hasPrefix("FAIL \(name) ") } ?? "no verdict"
                if !verdict.hasPrefix("ok ") { fail(block, "the Lua does not compile: \(verdict)") }
            }
        }
    }
}
