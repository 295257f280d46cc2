import ArgumentParser
import Foundation
import Lifeline
import LifelineNative

#if canImport(Glibc)
    import Glibc
#endif

struct New: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a new plugin, with scenarios that pass at once.",
        discussion: """
            Examples:
              lifeline new autosave            a Lua plugin, in plugins/autosave
              lifeline new autosave --swift    a Swift package: its own lifeline
              lifeline new autosave --native   a C plugin and its Makefile, built

            Writes DIR/NAME: a plugin that finishes its work in a background task and
            ends the task on every path, with scenarios whose expect lines hold it to
            them: basic (the work is done in time), expired (the time runs out first),
            twice (two trips to the background at once). A Lua plugin
            also gets the editor files (.luarc.json for the Lua language server,
            .luacheckrc for luacheck). `lifeline test DIR` passes right after; for a
            Swift package, its own lifeline's does (the command is printed).

            DIR/NAME must not exist: nothing is ever written over or merged. The files
            are written in a hidden folder beside it, then moved in at once, so either
            all of them are there or none.

            Exit codes:
              0   written (and, for --native, built)
              64  bad usage: a NAME that is not a plugin name, --swift with --native,
                  an empty --dir
              70  an internal error, or --native's build failed
              73  DIR/NAME exists already, or cannot be made
            """
    )

    @Argument(
        help: ArgumentHelp(
            "The plugin's name: ASCII letters, digits, '-' and '_', starting with a letter (at most 64).",
            valueName: "NAME"))
    var name: String

    @Option(help: ArgumentHelp("The folder of plugins to write it in (made if missing).", valueName: "DIR"))
    var dir: String = "plugins"

    @Flag(help: "A Swift package that builds its own lifeline with the plugin compiled in.")
    var swift = false

    @Flag(help: "A C plugin over lifeline_plugin.h, with a Makefile; built at once when cc is found.")
    var native = false

    @Option(
        name: .customLong("lifeline-package"),
        help: ArgumentHelp(
            "With --swift: the checkout of Lifeline the package builds against (default: the one this "
                + "lifeline was built from).",
            valueName: "PATH"))
    var lifelinePackage: String?

    func validate() throws {
        if swift && native { throw ValidationError("--swift and --native cannot be given together") }
        if dir.isEmpty { throw ValidationError("--dir is empty: give a folder, as in --dir plugins (or --dir . for here)") }
        if lifelinePackage != nil && !swift { throw ValidationError("--lifeline-package goes with --swift") }
        if let problem = NewPlugin.nameProblem(name) { throw ValidationError(problem) }
    }

    func run() throws {
        try runReportingErrors { () throws(LifelineError) -> Int32 in
            let folder = (dir as NSString).appendingPathComponent(name)
            let files: [NewTemplates.File]
            var next: [String]
            if swift {
                let checkout = try NewPlugin.checkout(lifelinePackage)
                let names = try NewPlugin.swiftNames(name, checkout: checkout)
                files = NewTemplates.swift(
                    name, typeName: names.typeName, executable: names.executable, checkout: checkout.path)
                next = [
                    "swift run --package-path \(shellQuoted(folder)) \(names.executable) test \(shellQuoted(dir))",
                    "(the first build compiles Lifeline and its packages: several minutes)",
                ]
            } else if native {
                files = NewTemplates.native(name)
                next = ["lifeline test \(shellQuoted(dir))"]
            } else {
                files = NewTemplates.lua(name) + NewPlugin.editorFiles()
                next = ["lifeline test \(shellQuoted(dir))"]
            }
            try NewPlugin.write(files, to: folder, in: dir)
            writeLine("created \(folder)/")
            for file in files.map(\.path).sorted() { writeLine("  \(file)") }
            if native {
                switch try NewPlugin.build(folder, name: name) {
                case .built: break
                case .failed: return 70
                case .noCompiler:
                    // Nothing to test yet: the library is built first, with the command just printed.
                    next = ["make -C \(shellQuoted(folder)), then " + next[0]]
                }
            }
            writeLine("next: \(next[0])")
            for line in next.dropFirst() { writeLine("      \(line)") }
            return 0
        }
    }
}

/// What `lifeline new` needs besides the templates: the name's rules, the checkout a Swift package
/// builds against, writing all files or none, and building a native plugin.
enum NewPlugin {
    /// Why `name` cannot name a new plugin, or nil. One rule for every kind, because a name is at
    /// once a folder, a word of a scenario's expect lines (`plugin=NAME`), the base of a Swift
    /// target and type, and a file name beside a Makefile: letters, digits, `-` and `_`, starting
    /// with a letter. So no `/`, no `.` or `..`, no hidden folder, no space, nothing to quote.
    static func nameProblem(_ name: String) -> String? {
        let rule = "a plugin name is ASCII letters, digits, '-' and '_', starting with a letter"
        guard let first = name.unicodeScalars.first else { return "NAME is empty: \(rule)" }
        let shown = "'\(Terminal.safe(name))'"
        if name.count > 64 { return "NAME \(shown) is longer than 64 characters" }
        guard ("a"..."z").contains(first) || ("A"..."Z").contains(first) else {
            return "NAME \(shown) does not start with an ASCII letter: \(rule)"
        }
        for scalar in name.unicodeScalars {
            let ok =
                ("a"..."z").contains(scalar) || ("A"..."Z").contains(scalar) || ("0"..."9").contains(scalar)
                || scalar == "-" || scalar == "_"
            if !ok {
                let what = scalar == " " ? "a space" : scalar == "/" ? "a '/'" : "'\(Terminal.safe(String(scalar)))'"
                return "NAME \(shown) has \(what): \(rule)"
            }
        }
        return nil
    }

    /// `autosave` → `Autosave`, `feed-refresh` → `FeedRefresh`: the Swift type's name.
    static func typeName(_ name: String) -> String {
        name.split(whereSeparator: { $0 == "-" || $0 == "_" }).map { $0.prefix(1).uppercased() + $0.dropFirst() }
            .joined()
    }

    /// The names a Swift package of `name` gets, refused (64) when SwiftPM or Swift would: a target
    /// or product that Lifeline's package has already, a package whose name is one of its
    /// dependencies', a type that hides `Lifeline` (the command line's entry) or is a keyword.
    static func swiftNames(_ name: String, checkout: Checkout) throws(LifelineError) -> (
        typeName: String, executable: String
    ) {
        let type = typeName(name)
        let executable = name + "-lifeline"
        // `String` too: the template's own code names Swift's String, which the class would hide.
        if ["Lifeline", "Self", "Any", "Type", "Protocol", "SwiftPlugin", "PluginContext", "String"].contains(type) {
            throw .usage(
                "NAME '\(name)' would make a Swift class '\(type)', which the package's own code needs: choose another")
        }
        for made in [type + "Plugin", executable] where checkout.names.contains(made) {
            throw .usage(
                "NAME '\(name)' would make a target '\(made)', and Lifeline's package has one already: choose another")
        }
        if checkout.packageIdentities.contains(name.lowercased()) {
            throw .usage(
                "NAME '\(name)' is also the name of a package Lifeline depends on (or of its checkout's folder), "
                    + "and SwiftPM refuses two packages of one name: choose another")
        }
        return (type, executable)
    }

    /// A checkout of Lifeline: its path, and the names its Package.swift declares.
    struct Checkout {
        var path: String
        /// Every `name: "…"` of its manifest: products and targets.
        var names: Set<String>
        /// The packages of the graph a package of one's own joins, lowercased as SwiftPM compares
        /// them: the checkout (named by its folder) and its dependencies (by their URLs' last part).
        var packageIdentities: Set<String>
    }

    /// The checkout of Lifeline a new Swift package builds against: `given`, else the one this
    /// binary was compiled from (this file's path at compile time), when it is still there.
    static func checkout(_ given: String?, compiledFrom file: String = #filePath) throws(LifelineError) -> Checkout {
        let path: String
        if let given {
            path = absolute(given)
        } else {
            path =
                URL(fileURLWithPath: file).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().path
        }
        guard let manifest = try? String(contentsOfFile: path + "/Package.swift", encoding: .utf8),
            manifest.range(of: #"Package\(\s*name:\s*"Lifeline""#, options: .regularExpression) != nil
        else {
            if let given {
                throw .usage("--lifeline-package '\(given)': no Package.swift of the package \"Lifeline\" there")
            }
            throw .usage(
                "this lifeline was built from '\(path)', which is no longer a checkout of Lifeline: "
                    + "give one with --lifeline-package PATH")
        }
        var names: Set<String> = []
        var identities: Set<String> = [URL(fileURLWithPath: path).lastPathComponent.lowercased()]
        let text = manifest as NSString
        let all = NSRange(location: 0, length: text.length)
        for match in try! NSRegularExpression(pattern: #"name:\s*"([^"]+)""#).matches(in: manifest, range: all) {
            names.insert(text.substring(with: match.range(at: 1)))
        }
        for match in try! NSRegularExpression(pattern: #"\.package\(\s*url:\s*"([^"]+)""#).matches(
            in: manifest, range: all)
        {
            var last = URL(string: text.substring(with: match.range(at: 1)))?.lastPathComponent ?? ""
            if last.hasSuffix(".git") { last.removeLast(4) }
            identities.insert(last.lowercased())
        }
        return Checkout(path: path, names: names, packageIdentities: identities)
    }

    /// For the message about a Swift plugin this lifeline lacks: when the plugin's folder is a
    /// Swift package (as `lifeline new --swift` writes one), the command that builds and runs
    /// that package's own lifeline, which has it; else nothing.
    static func ownLifelineHint(plugins: String, folder: String) -> String {
        let path = (plugins as NSString).appendingPathComponent(folder)
        guard let manifest = try? String(contentsOfFile: path + "/Package.swift", encoding: .utf8) else { return "" }
        let text = manifest as NSString
        let executables = try! NSRegularExpression(pattern: #"\.executable\(\s*name:\s*"([^"]+)""#)
            .matches(in: manifest, range: NSRange(location: 0, length: text.length))
            .map { text.substring(with: $0.range(at: 1)) }
        let executable = executables.count == 1 ? shellQuoted(executables[0]) : "EXECUTABLE"
        return "; '\(path)' is a Swift package that builds its own lifeline with it: "
            + "swift run --package-path \(shellQuoted(path)) \(executable) test \(shellQuoted(plugins))"
    }

    /// `path` made absolute against the working folder, without `.` and `..` parts.
    static func absolute(_ path: String) -> String {
        let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
        return URL(fileURLWithPath: full).standardizedFileURL.path
    }

    /// The editor files a Lua plugin gets, so that its editor knows the `lifeline` module and
    /// luacheck its globals (docs/editors.md). They sit in the plugin's folder, the root an editor
    /// opens; their names start with a dot, which the loader and `lifeline test` skip.
    static func editorFiles() -> [NewTemplates.File] {
        EditorFiles.files.map { NewTemplates.File(path: $0.path, text: $0.contents) }
    }

    /// Writes `files` into the new folder `folder` of `parent`: all of them or none. They are
    /// written into a hidden folder beside it (which `lifeline test` and the loader skip, should
    /// this process be killed), then renamed into place. An existing `folder` is exit 73 and is
    /// left exactly as it was.
    static func write(_ files: [NewTemplates.File], to folder: String, in parent: String) throws(LifelineError) {
        let fm = FileManager.default
        var info = stat()
        if lstat(folder, &info) == 0 {
            throw .cannotCreate(
                "'\(folder)' exists already: lifeline new never writes over a folder (choose another NAME or --dir)")
        }
        var isFolder: ObjCBool = false
        if fm.fileExists(atPath: parent, isDirectory: &isFolder), !isFolder.boolValue {
            throw .cannotCreate("cannot make '\(folder)': '\(parent)' is not a folder")
        }
        try makeFolders(parent)
        let base = (folder as NSString).lastPathComponent
        var template = Array("\((parent as NSString).appendingPathComponent(".\(base).new-XXXXXX"))".utf8CString)
        guard let made = mkdtemp(&template) else {
            throw .cannotCreate("cannot write in '\(parent)': \(String(cString: strerror(errno)))")
        }
        let temporary = String(cString: made)
        do {
            // mkdtemp makes the folder 0700; the plugin's folder gets the usual mode.
            chmod(temporary, 0o755)
            for file in files {
                let path = temporary + "/" + file.path
                try fm.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try Data(file.text.utf8).write(to: URL(fileURLWithPath: path))
            }
        } catch {
            try? fm.removeItem(atPath: temporary)
            throw .cannotCreate("cannot write '\(folder)': \(reason(error))")
        }
        // rename(2) refuses a folder that is not empty and anything not a folder; the check above
        // makes the one case it allows (an empty folder made since) a race of microseconds.
        if rename(temporary, folder) != 0 {
            let problem = errno
            try? fm.removeItem(atPath: temporary)
            if problem == EEXIST || problem == ENOTEMPTY || problem == ENOTDIR {
                throw .cannotCreate(
                    "'\(folder)' exists already: lifeline new never writes over a folder (choose another NAME or --dir)"
                )
            }
            throw .cannotCreate("cannot make '\(folder)': \(String(cString: strerror(problem)))")
        }
    }

    /// `mkdir -p`, with the part that failed and the system's reason in the message (Foundation's
    /// says "NSCocoaErrorDomain error 512" when a part is a file).
    private static func makeFolders(_ path: String) throws(LifelineError) {
        var made = path.hasPrefix("/") ? "" : "."
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            made += "/" + part
            if mkdir(made, 0o777) == 0 { continue }
            let problem = errno
            var info = stat()
            if problem == EEXIST, stat(made, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR { continue }
            let shown = path.hasPrefix("/") ? made : String(made.dropFirst(2))
            let why = problem == EEXIST ? "it exists and is not a folder" : String(cString: strerror(problem))
            if shown == path { throw .cannotCreate("cannot make the folder '\(path)': \(why)") }
            throw .cannotCreate("cannot make the folder '\(path)': '\(shown)': \(why)")
        }
    }

    private static func reason(_ error: Error) -> String {
        if let error = error as? CocoaError, let underlying = error.userInfo[NSUnderlyingErrorKey] as? NSError,
            underlying.domain == NSPOSIXErrorDomain
        {
            return String(cString: strerror(Int32(underlying.code)))
        }
        return error.localizedDescription
    }

    enum Build { case built, noCompiler, failed }

    /// Builds a new native plugin with its Makefile, against this binary's header, printing what
    /// it runs; without make, with the Makefile's own cc command (a machine may have a compiler
    /// and no make). Without cc it says so and prints the command: the files are written, and
    /// that is not a failure. A build that fails is `.failed`: the template must build.
    static func build(_ folder: String, name: String) throws(LifelineError) -> Build {
        let compiler = ProcessInfo.processInfo.environment["CC"] ?? "cc"
        guard let cc = executable(named: compiler) else {
            writeLine("no \(compiler) found to build it: with a C compiler, run")
            writeLine("  make -C \(shellQuoted(folder))")
            return .noCompiler
        }
        let command: [String]
        if let make = executable(named: "make") {
            // The header of this very binary, whatever lifeline PATH holds.
            let me = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? "lifeline"
            command = [make, "--no-print-directory", "-C", folder, "LIFELINE=\(me)"]
        } else {
            let include = try NativeHeader.includeDirectory()
            command = [
                cc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-I\(include)", folder + "/\(name).c", "-o",
                folder + "/\(name).so",
            ]
        }
        writeLine("running: \(command.map(shellQuoted).joined(separator: " "))")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        do {
            try process.run()
        } catch {
            throw .internalError("cannot run \(command[0]): \(error.localizedDescription)")
        }
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            FileHandle.standardError.write(
                Data(
                    "lifeline: the build of '\(folder)' failed (exit \(process.terminationStatus)); its files are written\n"
                        .utf8))
            return .failed
        }
        return .built
    }

    /// The path of an executable on PATH (or `name` itself when it holds a `/`).
    static func executable(named name: String) -> String? {
        if name.contains("/") { return FileManager.default.isExecutableFile(atPath: name) ? name : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/\(name)" }.first {
            FileManager.default.isExecutableFile(atPath: $0)
        }
    }
}

/// `text` as one word for a POSIX shell: as it is when it is plain, else in single quotes.
func shellQuoted(_ text: String) -> String {
    let plain = text.unicodeScalars.allSatisfy {
        ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
            || "-_./=:,+@%".unicodeScalars.contains($0)
    }
    if plain && !text.isEmpty { return text }
    return "'" + text.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
}
