import Foundation
import Testing

/// The layout of the repository itself: rules that hold the tree, checked on the files as they are
/// on disk (build folders and hidden folders left out).
@Suite struct RepositoryLayoutTests {
    /// Every file and folder under the package root, as paths relative to it.
    static func paths() -> [String] {
        let root = URL(fileURLWithPath: CLI.packageRoot)
        var found: [String] = []
        func walk(_ relative: String) {
            let folder = relative.isEmpty ? root : root.appendingPathComponent(relative)
            guard let names = try? FileManager.default.contentsOfDirectory(atPath: folder.path) else { return }
            for name in names.sorted() where !name.hasPrefix(".") {
                let path = relative.isEmpty ? name : relative + "/" + name
                found.append(path)
                var isFolder: ObjCBool = false
                if FileManager.default.fileExists(atPath: root.appendingPathComponent(path).path, isDirectory: &isFolder),
                    isFolder.boolValue
                {
                    walk(path)
                }
            }
        }
        walk("")
        return found
    }

    /// A clone on a case-insensitive disk (macOS's default) would merge them.
    @Test func noTwoPathsDifferOnlyByCase() {
        var byFolded: [String: [String]] = [:]
        for path in Self.paths() { byFolded[path.lowercased(), default: []].append(path) }
        let clashes = byFolded.values.filter { $0.count > 1 }.map { $0.sorted().joined(separator: " / ") }.sorted()
        #expect(clashes.isEmpty, "paths that differ only by case: \(clashes)")
    }

    /// The core's components know a plugin by its ref and ask the host by request: only the
    /// host itself, its `check`, the two drivers and the queues' Swift face name the plugin's
    /// context or the host. Plugins/ is the context's own room.
    @Test func coreFiles_outsidePlugins_nameTheContextOrTheHostOnlyWhereTheyMust() throws {
        let allowed: Set<String> = [
            "Sources/Lifeline/Host/LifelineHost.swift", "Sources/Lifeline/Host/LifelineHost+Reload.swift",
            "Sources/Lifeline/Host/PluginCheck.swift",
            "Sources/Lifeline/Runs/LiveRun.swift", "Sources/Lifeline/Runs/Simulation.swift",
            "Sources/Lifeline/Queues/BackgroundQueue.swift",
        ]
        let names = try Regex(#"\b(PluginContext|LifelineHost)\b"#)
        var naming: Set<String> = []
        for path in Self.paths() where path.hasPrefix("Sources/Lifeline/") && path.hasSuffix(".swift")
            && !path.hasPrefix("Sources/Lifeline/Plugins/")
        {
            let text = try String(contentsOfFile: CLI.packageRoot + "/" + path, encoding: .utf8)
            if text.contains(names) { naming.insert(path) }
        }
        #expect(naming.count <= 6)
        #expect(naming.subtracting(allowed).isEmpty, "files that now name PluginContext or LifelineHost: \(naming.subtracting(allowed).sorted())")
    }
}
