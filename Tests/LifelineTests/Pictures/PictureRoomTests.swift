import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// Where the pictures live: Report/ records a run and Pictures/ draws it, so no markup is written
// in the recording's files; the page's style and script are files of their own, compiled into the
// binary, and the page holds them as they are.

/// The Swift files of a folder of Sources/Lifeline, as (name, text), read from disk.
private func swiftFiles(under folder: String) throws -> [(name: String, text: String)] {
    let root = Corpora.repository.appendingPathComponent("Sources/Lifeline")
    let base = root.appendingPathComponent(folder)
    let walker = try #require(FileManager.default.enumerator(atPath: base.path), "no folder \(base.path)")
    var files: [(name: String, text: String)] = []
    for case let path as String in walker where path.hasSuffix(".swift") {
        let text = try String(contentsOf: base.appendingPathComponent(path), encoding: .utf8)
        files.append((folder.isEmpty ? path : folder + "/" + path, text))
    }
    return files.sorted { $0.name < $1.name }
}

/// What starts markup of a page or a chart.
private let markup = ["<svg", "<html", "<div", "<style", "<script", "<!doctype"]

private func markupIn(_ text: String) -> [String] {
    let lower = text.lowercased()
    return markup.filter { lower.contains($0) }
}

/// A resource file's bytes, read from disk.
private func resourceFile(_ name: String) throws -> [UInt8] {
    let url = Corpora.repository.appendingPathComponent("Sources/Lifeline/Pictures/Resources/" + name)
    return [UInt8](try Data(contentsOf: url))
}

@Test func recordingFiles_holdNoHTMLOrSVG() throws {
    let files = try swiftFiles(under: "Report")
    // The folder is there and read: the recording's own files are among them.
    #expect(files.contains { $0.name == "Report/Recorder.swift" })
    #expect(files.contains { $0.name == "Report/TimelineStore.swift" })
    for file in files {
        #expect(markupIn(file.text).isEmpty, "\(file.name) holds \(markupIn(file.text))")
    }
}

@Test func markupInTheCore_isInPicturesAlone() throws {
    let outside = try swiftFiles(under: "").filter { !$0.name.hasPrefix("Pictures/") && !markupIn($0.text).isEmpty }
    #expect(outside.map(\.name).isEmpty, "markup outside Pictures/: \(outside.map(\.name))")
}

@Test func pageStyleAndScript_areTheResourceFiles_compiledIn() throws {
    let css = try resourceFile("report.css")
    let js = try resourceFile("report.js")
    // The bytes in the binary are the files' bytes: the build embedded these very files.
    #expect(PackageResources.report_css == css)
    #expect(PackageResources.report_js == js)
    // The page's text is the file's, without the newline that ends the file.
    #expect(ReportPage.style == String(decoding: css, as: UTF8.self).trimmingSuffix("\n"))
    #expect(ReportPage.script == String(decoding: js, as: UTF8.self).trimmingSuffix("\n"))
    #expect(ReportPage.style.hasPrefix(":root {"))
    #expect(ReportPage.style.count > 1000)
    #expect(ReportPage.script.hasPrefix("(function () {"))
    #expect(ReportPage.script.hasSuffix("})();"))
    #expect(ReportPage.script.count > 1000)
}

@Test func page_holdsTheStyleAndScript_asTheyAre() {
    let pages: [[RenderedRun]] = [
        [], [PictureFixtures.expiration()], [PictureFixtures.expiration(), PictureFixtures.terminated()],
    ]
    for runs in pages {
        let html = ReportPage.html(runs)
        #expect(html.contains("<style>" + ReportPage.style + "</style>\n</head>\n"))
        #expect(html.hasSuffix("<script>" + ReportPage.script + "</script>\n</body>\n</html>\n"))
    }
}

extension String {
    /// The text without any `suffix` repeated at its end.
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        var text = self
        while text.hasSuffix(suffix) { text.removeLast(suffix.count) }
        return text
    }
}
