/// The folder a file path names its file in: `.` for a bare name, `/` for a file at the root.
/// Plain string work (Foundation's path functions trap on some one-character paths).
public func parentFolder(of path: String) -> String {
    var trimmed = Substring(path)
    while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
    guard let slash = trimmed.lastIndex(of: "/") else { return "." }
    let parent = trimmed[..<slash]
    return parent.isEmpty ? "/" : String(parent)
}
