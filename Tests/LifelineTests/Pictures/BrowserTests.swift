import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The HTML page in a real browser: Debian's chromium, headless. The page draws its lanes with a
// script, so only a browser can tell that the script ran to the end without an error. The tests
// are skipped where chromium is not installed (scripts/setup installs it).

/// Chromium's path: `chromium` (or `chromium-browser`) on PATH, else the usual Debian place.
private let chromium: String? = {
    let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
    let dirs = path.split(separator: ":").map(String.init) + ["/usr/bin", "/usr/local/bin", "/snap/bin"]
    for dir in dirs {
        for name in ["chromium", "chromium-browser"] {
            let candidate = dir + "/" + name
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
    }
    return nil
}()

/// What chromium printed to stdout, after running it with `arguments` for at most `seconds`.
/// Output goes to a file rather than a pipe, so a large DOM cannot fill a pipe and stall it.
/// The deadline only keeps a chromium that hangs from hanging the suite; the tests carry no time
/// limit of their own, since beside the rest of the suite on two cores chromium can take a minute.
private func runChromium(_ arguments: [String], in dir: URL, seconds: Double = 120) throws -> String {
    let binary = try #require(chromium)
    let out = dir.appendingPathComponent("stdout-\(UUID().uuidString).txt")
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    let handle = try FileHandle(forWritingTo: out)
    defer { try? handle.close() }
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    // A profile of its own per run, since tests run in parallel and chromium locks its profile.
    process.arguments =
        [
            "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
            "--user-data-dir=\(dir.appendingPathComponent("profile-\(UUID().uuidString)").path)",
        ] + arguments
    process.standardOutput = handle
    let err = dir.appendingPathComponent("stderr-\(UUID().uuidString).txt")
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let errHandle = try FileHandle(forWritingTo: err)
    defer { try? errHandle.close() }
    process.standardError = errHandle
    var environment = ProcessInfo.processInfo.environment
    environment["HOME"] = dir.path
    process.environment = environment
    try process.run()
    let deadline = Date().addingTimeInterval(seconds)
    while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    if process.isRunning {
        // SIGTERM first; a chromium that ignores it gets SIGKILL, so the wait below always ends.
        process.terminate()
        let grace = Date().addingTimeInterval(5)
        while process.isRunning && Date() < grace { Thread.sleep(forTimeInterval: 0.05) }
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
        let said = (try? String(contentsOf: err, encoding: .utf8)) ?? ""
        Issue.record("chromium took more than \(seconds) s; its stderr ended: \(said.suffix(2000))")
    }
    return (try? String(contentsOf: out, encoding: .utf8)) ?? ""
}

/// A folder of its own under the system's temporary folder, removed by the caller.
private func temporaryFolder() throws -> URL {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-page-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    return dir
}

/// The value of `name="…"` in the `<body …>` tag of a DOM dump.
private func bodyAttribute(_ name: String, in dom: String) -> String? {
    guard let open = dom.range(of: "<body") else { return nil }
    guard let close = dom.range(of: ">", range: open.upperBound..<dom.endIndex) else { return nil }
    let tag = dom[open.upperBound..<close.lowerBound]
    guard let start = tag.range(of: "\(name)=\"") else { return nil }
    guard let end = tag.range(of: "\"", range: start.upperBound..<tag.endIndex) else { return nil }
    return String(tag[start.upperBound..<end.lowerBound])
}

/// scripts/test runs this suite apart from the others, on an otherwise idle machine.
@Suite struct BrowserTests {
    @Test(.enabled(if: chromium != nil, "chromium is not installed"))
    func browser_runsThePageScript_toTheEndWithoutError() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let runs = [PictureFixtures.expiration(), PictureFixtures.terminated(), PictureFixtures.hostile()]
        let page = dir.appendingPathComponent("report.html")
        try ReportPage.html(runs).write(to: page, atomically: true, encoding: .utf8)

        let dom = try runChromium(["--dump-dom", page.absoluteString], in: dir)
        #expect(bodyAttribute("data-error", in: dom) == nil, "script error: \(bodyAttribute("data-error", in: dom) ?? "")")
        #expect(bodyAttribute("data-rendered", in: dom) == "ok")
        let lanes = Int(bodyAttribute("data-lanes", in: dom) ?? "") ?? 0
        #expect(lanes > 10)
        // The hostile run's script tag stayed text: no script of it ran, so no alert replaced the page.
        #expect(dom.contains("class=\"lane-bg\""))
        // The index links every run to its section on the page.
        #expect(dom.contains("<nav class=\"index\">"))
        for i in 0..<runs.count {
            #expect(dom.contains("href=\"#run-\(i)\""))
            #expect(dom.contains("id=\"run-\(i)\""))
        }
    }

    @Test(.enabled(if: chromium != nil, "chromium is not installed"))
    func browser_screenshotOfARun_isAPicture() throws {
        let dir = try temporaryFolder()
        defer { try? FileManager.default.removeItem(at: dir) }
        let page = dir.appendingPathComponent("report.html")
        try ReportPage.html([PictureFixtures.expiration()]).write(to: page, atomically: true, encoding: .utf8)
        let png = dir.appendingPathComponent("report.png")

        _ = try runChromium(["--screenshot=\(png.path)", "--window-size=1400,900", page.absoluteString], in: dir)
        let bytes = try Data(contentsOf: png)
        #expect(bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]))
        // A blank 1400×900 page compresses to a few kilobytes; lanes and text take tens of them.
        #expect(bytes.count > 30_000)
        // To refresh the README's picture: LIFELINE_PAGE_SCREENSHOT=docs/report.png swift test --filter BrowserTests
        if let keep = ProcessInfo.processInfo.environment["LIFELINE_PAGE_SCREENSHOT"] {
            try bytes.write(to: URL(fileURLWithPath: keep))
        }
    }
}
