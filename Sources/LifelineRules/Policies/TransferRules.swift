import Foundation
import HTTPTypes

// The rules of background transfers, as pure values: they take what happened and the
// time, and say what to do. The transfer runtime carries them out; tests drive them with plain
// numbers.

/// Where a plugin's files may be: relative names under the plugin's own files folder
/// (`<state-dir>/files/<plugin>/`), for transfers and for `PluginFiles` alike. Absolute paths,
/// `..`, NUL, symbolic links that lead outside the folder, and the names of `PluginFiles`'
/// temporaries are refused. This checks the name when the call is made; every later step checks
/// again on the open folder (`PluginFolder`), so a link made in between leads nowhere.
public struct TransferPath: Equatable, Sendable {
    /// The plugin's files folder.
    public let root: String
    /// The name as the plugin gave it.
    public let name: String
    /// The full path of the file.
    public let path: String

    /// Checks `name` against the plugin's folder `root`. Links already on disk are followed: a
    /// name whose real location is outside `root` is refused.
    /// The most parts (folders and the file) a name may have.
    public static let maximumParts = 32
    /// The longest name, in bytes, as for the host's other names; and the longest part (NAME_MAX).
    /// Both are checked before anything is made, so a name the system would refuse half-way
    /// (past PATH_MAX) leaves no folders behind.
    public static let maximumLength = 1024, maximumPartLength = 255
    /// The first characters of the host's temporaries' names. `resolve` refuses names that start
    /// with them, and the folder's listing leaves them out, so no file a plugin can name is one.
    public static let temporaryPrefix = ".lifeline-tmp-"

    public static func resolve(_ name: String, in root: String) throws(TransferError) -> TransferPath {
        guard !name.isEmpty else { throw TransferError("a file name must not be empty") }
        guard !name.hasPrefix("/") else {
            throw TransferError("'\(name)' is an absolute path; give a name relative to the plugin's files folder")
        }
        guard !name.utf8.contains(0) else { throw TransferError("a file name must not contain NUL") }
        guard name.utf8.count <= maximumLength else {
            throw TransferError(
                "'\(name.prefix(64))…' is too long (\(name.utf8.count) bytes); a file name may be at most "
                    + "\(maximumLength) bytes")
        }
        let parts = name.split(separator: "/", omittingEmptySubsequences: true)
        guard !parts.contains(where: { $0 == ".." }) else {
            throw TransferError("'\(name)' leaves the plugin's files folder ('..' is not allowed)")
        }
        guard !parts.isEmpty, parts.last != "." else { throw TransferError("'\(name)' does not name a file") }
        // "dir/" names a folder: a write must not quietly make a file 'dir' of it.
        guard !name.hasSuffix("/") else {
            throw TransferError("'\(name)' does not name a file: it ends with '/', as a folder's name does")
        }
        if let long = parts.first(where: { $0.utf8.count > maximumPartLength }) {
            throw TransferError(
                "'\(long.prefix(64))…' in '\(name.prefix(64))…' is too long (\(long.utf8.count) bytes); each part of a "
                    + "file name may be at most \(maximumPartLength) bytes")
        }
        // Every folder a name can make is one the quota's walk reaches (`PluginFolder`).
        guard parts.count <= maximumParts else {
            throw TransferError("'\(name.prefix(64))…' has more than \(maximumParts) parts; a file name may have at most \(maximumParts)")
        }
        // A write's temporary must never share a name with a file the plugin can name.
        guard !parts.last!.hasPrefix(Self.temporaryPrefix) else {
            throw TransferError("'\(name)': names that start with '\(Self.temporaryPrefix)' are the host's")
        }
        let clean = parts.filter { $0 != "." }.joined(separator: "/")
        let path = (root as NSString).appendingPathComponent(clean)
        // The files folder's own path counts too: past PATH_MAX the system refuses the path.
        guard path.utf8.count < Int(PATH_MAX) else {
            throw TransferError(
                "'\(name.prefix(64))…' is too long for the plugin's files folder: with the folder's own path it "
                    + "passes the system's limit of \(PATH_MAX) bytes")
        }
        // The files folder is the host's own; a link in its place (to another plugin's, say) was
        // not made by the host.
        if (try? FileManager.default.attributesOfItem(atPath: root))?[.type] as? FileAttributeType == .typeSymbolicLink {
            throw TransferError("the plugin's files folder is a link, not a folder; remove the link")
        }
        // Walk the components without following links (lstat): a link on the way must lead to a
        // place inside root that exists; a dangling one could later be made to lead anywhere.
        let realRoot = realPath(root) ?? root
        let components = clean.split(separator: "/")
        var probe = root
        for (i, component) in components.enumerated() {
            probe += "/" + component
            guard let attributes = try? FileManager.default.attributesOfItem(atPath: probe) else { break }
            guard attributes[.type] as? FileAttributeType == .typeSymbolicLink else { continue }
            // The file itself must not be a link: the final rename would replace or follow it.
            if i == components.count - 1 {
                throw TransferError("'\(name)' is a link; a plugin's file must be a plain file")
            }
            guard let real = realPath(probe), real == realRoot || real.hasPrefix(realRoot + "/") else {
                throw TransferError("'\(name)' leads outside the plugin's files folder (through a link)")
            }
        }
        return TransferPath(root: root, name: clean, path: path)
    }

    private static func realPath(_ path: String) -> String? {
        guard let p = realpath(path, nil) else { return nil }
        defer { free(p) }
        return String(cString: p)
    }
}

/// When to try a failed transfer again: exponential backoff with jitter, Retry-After honoured,
/// up to a number of attempts. Connection errors and 5xx are retried; 4xx fail at once.
public struct RetryPolicy: Equatable, Sendable {
    /// Attempts in all, the first one included.
    public var maximumAttempts = 5
    /// The delay after the first failure, doubled after each one.
    public var initialDelay: Double = 1
    /// No delay is longer than this (a Retry-After is capped too).
    public var maximumDelay: Double = 300
    /// The share of each delay that is random, so clients that failed together do not retry together.
    public var jitter: Double = 0.2

    public init() {}

    /// What failed an attempt.
    public enum Failure: Equatable, Sendable {
        /// The connection could not be made or broke.
        case connection(String)
        /// The server answered with this status; `retryAfter` is its Retry-After in seconds.
        case status(Int, retryAfter: Double?)
        /// The file did not check out (size, sha256); retrying cannot help.
        case verification(String)
    }

    /// What to do after a failed attempt.
    public enum Decision: Equatable, Sendable {
        case retry(after: Double)
        case fail(reason: String)
    }

    /// - Parameters:
    ///   - attempts: the attempts made so far, the failed one included.
    ///   - random: a number in 0..<1 for the jitter (the host's seeded generator in simulate).
    public func decide(_ failure: Failure, attempts: Int, random: Double) -> Decision {
        let retryAfter: Double?
        switch failure {
        case .verification(let why):
            return .fail(reason: why)
        case .status(429, let after):
            // Too Many Requests: the server asks to come back later, usually with Retry-After.
            retryAfter = after
        case .status(let code, _) where (400..<500).contains(code):
            return .fail(reason: "the server answered \(code)")
        case .status(let code, let after) where (500..<600).contains(code):
            retryAfter = after
        case .status(let code, _):
            return .fail(reason: "the server answered \(code)")
        case .connection:
            retryAfter = nil
        }
        guard attempts < maximumAttempts else {
            return .fail(reason: "gave up after \(attempts) attempts: \(RetryPolicy.describe(failure))")
        }
        if let retryAfter, retryAfter >= 0 { return .retry(after: min(retryAfter, maximumDelay)) }
        let base = initialDelay * pow(2, Double(attempts - 1))
        return .retry(after: min(base * (1 - jitter + 2 * jitter * random), maximumDelay))
    }

    package static func describe(_ failure: Failure) -> String {
        switch failure {
        case .connection(let why): return why
        case .status(let code, _): return "the server answered \(code)"
        case .verification(let why): return why
        }
    }
}

/// Whether a download may resume where it stopped, and how: with HTTP Range only where that is
/// safe (a GET with a validator that still matches, sent as If-Range), else from zero. Bytes of
/// two different versions are never spliced together.
public enum ResumeRule {
    /// The headers of the next attempt, for a partial file of `received` bytes. With an ETag,
    /// only a strong one validates; a date is used only when there is no ETag at all (RFC 9110
    /// 13.1.5), since two versions can share a second.
    public static func headers(
        method: String, received: Int64, etag: String?, lastModified: String?
    ) -> HTTPFields {
        let validator = etag == nil ? lastModified : strongValidator(etag: etag)
        guard method == "GET", received > 0, let validator else { return [:] }
        // The validator goes back byte for byte as the server sent it.
        return HTTPFields([
            HTTPField(name: .range, value: "bytes=\(received)-"), HTTPField(name: .ifRange, lenientValue: validator.utf8),
        ])
    }

    /// A weak ETag (W/"…") cannot validate a byte range (RFC 9110 13.1.5).
    package static func strongValidator(etag: String?) -> String? {
        guard let etag, !etag.hasPrefix("W/") else { return nil }
        return etag
    }

    /// What the response to a resumed request means for the partial file.
    public enum Outcome: Equatable, Sendable {
        /// 206 for the bytes asked for: append.
        case append
        /// A whole new body (200: the file changed, or the server ignores ranges): start from zero.
        case restart
        /// A 206 for other bytes than asked for: never splice; start again without a range.
        case mismatch
    }

    /// For a 2xx response only: other statuses are failures, for `RetryPolicy`.
    public static func outcome(status: Int, contentRange: String?, requestedFrom received: Int64) -> Outcome {
        guard received > 0 else { return .restart }
        guard status == 206 else { return .restart }
        // "bytes START-END/TOTAL"
        guard let contentRange, contentRange.hasPrefix("bytes "),
            let start = Int64(contentRange.dropFirst(6).prefix { $0 != "-" }), start == received
        else { return .mismatch }
        return .append
    }
}

/// At most `perSecond` progress reports per transfer, and always the last one.
public struct ProgressThrottle: Equatable, Sendable {
    public var perSecond: Double = 4
    private var last: [Int64: Double] = [:]

    public init() {}

    /// Whether the progress of `transfer` at `time` (seconds) is reported.
    public mutating func admit(_ transfer: Int64, at time: Double, final: Bool = false) -> Bool {
        if final {
            last[transfer] = nil
            return true
        }
        if let previous = last[transfer], time - previous < 1 / perSecond { return false }
        last[transfer] = time
        return true
    }
}
