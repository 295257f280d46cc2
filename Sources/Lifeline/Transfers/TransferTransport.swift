import Crypto
import Foundation

/// One attempt at a background transfer, as the host hands it to a transport.
public struct TransferAttempt: Sendable {
    public var kind: TransferRecord.Kind
    /// Method, URL and headers: for a resumed download, Range and If-Range (`ResumeRule`).
    public var request: HTTPRequest
    /// The plugin's files folder.
    public var root: String
    /// A download's final name, an upload's file, relative to `root` (checked by `TransferPath`).
    public var name: String
    /// The transfer's ledger id, which names its partial file.
    public var id: Int64
    /// The bytes already in the partial file, which the request's Range asks the rest after.
    public var resumeFrom: Int64
    /// The expected SHA-256 of a download, lowercase hex.
    public var sha256: String?

    public init(
        kind: TransferRecord.Kind, request: HTTPRequest, root: String, name: String, id: Int64, resumeFrom: Int64,
        sha256: String?
    ) {
        self.kind = kind
        self.request = request
        self.root = root
        self.name = name
        self.id = id
        self.resumeFrom = resumeFrom
        self.sha256 = sha256
    }

    /// The file's full path.
    public var path: String { root + "/" + name }

    /// Where a download's bytes go until they are verified, relative to `root`: its own partial file.
    public var partialName: String { DownloadFile.partialName(name, id: id) }

    /// An upload's whole file, read through its checked folder (`PluginFolder`).
    public func uploadBytes() throws(TransferError) -> [UInt8] {
        let (folder, leaf) = try PluginFolder.holding(name, in: root, create: false)
        return try folder.read(leaf)
    }

    /// An upload's file, opened through its checked folder and sized, for a transport that sends
    /// it a chunk at a time: the host then holds one chunk of a file of any size, not all of it.
    package func openUpload() throws(TransferError) -> OpenFile {
        let (folder, leaf) = try PluginFolder.holding(name, in: root, create: false)
        guard let file = try folder.openForReading(leaf) else {
            throw TransferError("cannot open '\(folder.relative(leaf))': \(String(cString: strerror(ENOENT)))")
        }
        return file
    }

    /// The size of an upload's file, read through its checked folder.
    public func uploadSize() throws(TransferError) -> Int64 {
        let (folder, leaf) = try PluginFolder.holding(name, in: root, create: false)
        guard let size = folder.size(of: leaf) else {
            throw TransferError("cannot open '\(folder.relative(leaf))': it is missing or not a plain file")
        }
        return size
    }
}

/// What a transport tells the host while an attempt runs, from any thread.
public enum TransferReport: Sendable {
    /// Bytes in the partial file (download) or sent (upload) so far, and the whole size once known.
    case progress(bytes: Int64, total: Int64?)
}

/// How an attempt ended.
public enum TransferAttemptResult: Sendable, Equatable {
    /// The server answered. For a 2xx download the file is complete, verified and under its final
    /// name; for any other status nothing was written.
    case response(status: Int, headers: HTTPFields, bytes: Int64)
    /// A 206 for other bytes than the ones asked for: nothing was written, and the next attempt
    /// starts from zero without a range.
    case rangeMismatch
    /// The file did not check out (size, sha256; it was removed), or could not be written.
    /// Trying again cannot help.
    case fileFailed(String)
    /// The exchange failed; a download's partial file keeps what arrived.
    case failed(HTTPFailure)
}

/// Where background transfers go: the scripted network in simulate, async-http-client in run.
/// Unlike `HTTPTransport`, a transfer streams to and from files and has no overall timeout.
public protocol TransferTransport: AnyObject, Sendable {
    /// Starts one attempt. Calls `report` any number of times, then `completion` exactly once,
    /// unless the returned value's `cancel()` comes first (then maybe, and the host ignores it).
    func transfer(
        _ attempt: TransferAttempt, report: @escaping @Sendable (TransferReport) -> Void,
        completion: @escaping @Sendable (TransferAttemptResult) -> Void
    ) -> any HTTPCancellable
}

/// A transport for hosts with no network: every transfer fails to connect.
public final class NoTransferTransport: TransferTransport {
    public init() {}
    public func transfer(
        _ attempt: TransferAttempt, report: @escaping @Sendable (TransferReport) -> Void,
        completion: @escaping @Sendable (TransferAttemptResult) -> Void
    ) -> any HTTPCancellable {
        completion(.failed(HTTPFailure(.connect, "this host has no network transport")))
        return NothingToCancel()
    }
}

/// The partial file of one download attempt, and the step that gives it its final name. Every
/// transport writes downloads through it, so the rules are the same in simulate and in run:
/// bytes go to the transfer's own `NAME.ID.partial`; a resumed response is appended only when it
/// starts where the file ends (`ResumeRule`); the file gets its final name by an atomic rename
/// once its size (and its SHA-256, when given) check out.
///
/// All of it happens in the file's folder held open (`PluginFolder`), never through a path
/// that a link could redirect; messages name files relative to the plugin's files folder.
///
/// The validators (ETag, Last-Modified) of the bytes in the partial file are kept beside it, in
/// `NAME.ID.partial.validator`, written before the first byte of a new version: a host killed at
/// any moment resumes only with the validator of the bytes it has.
///
/// Threading: one thread at a time (the transport's).
public final class DownloadFile: @unchecked Sendable {
    /// The plugin's files folder, and the names under it.
    public let root: String
    public let name: String
    public let partialName: String
    private let resumeFrom: Int64
    private var folder: PluginFolder?
    private var leaf = "", partialLeaf = ""
    private var fd: Int32 = -1
    /// Bytes in the partial file.
    public private(set) var size: Int64
    /// The whole size, from the response head, when it says.
    public private(set) var expectedSize: Int64?

    /// Where the bytes of transfer `id` to `name` go until they are verified. Each transfer has
    /// its own, so a late write of a cancelled one never reaches another's bytes.
    public static func partialName(_ name: String, id: Int64) -> String { "\(name).\(id).partial" }

    static func validatorName(_ partialName: String) -> String { partialName + ".validator" }

    public init(root: String, name: String, id: Int64, resumeFrom: Int64) {
        self.root = root
        self.name = name
        self.partialName = DownloadFile.partialName(name, id: id)
        self.resumeFrom = resumeFrom
        self.size = resumeFrom
    }

    /// The partial file of `attempt`.
    public convenience init(_ attempt: TransferAttempt) {
        self.init(root: attempt.root, name: attempt.name, id: attempt.id, resumeFrom: attempt.resumeFrom)
    }

    deinit { close() }

    /// The most a validator sidecar holds: an ETag and a date, with room to spare.
    static let maximumValidatorBytes = 16 * 1024

    /// Where a download resumes: the bytes in its partial file, and the validators they came with.
    public static func resumePoint(
        root: String, partialName: String
    ) -> (bytes: Int64, etag: String?, lastModified: String?) {
        // The validators are two header values: a sidecar larger than that is not one the host
        // wrote, and the download starts again from zero rather than read it all.
        guard let (folder, leaf) = try? PluginFolder.holding(partialName, in: root, create: false),
            let bytes = folder.size(of: leaf), bytes > 0,
            case .bytes(let validators)? = try? folder.read(validatorName(leaf), limit: maximumValidatorBytes)
        else { return (0, nil, nil) }
        let text = String(decoding: validators, as: UTF8.self)
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let etag = lines.count > 0 && !lines[0].isEmpty ? lines[0] : nil
        let lastModified = lines.count > 1 && !lines[1].isEmpty ? lines[1] : nil
        return (bytes, etag, lastModified)
    }

    /// Removes a partial file and its validators.
    public static func discard(root: String, partialName: String) {
        guard let (folder, leaf) = try? PluginFolder.holding(partialName, in: root, create: false) else { return }
        folder.remove(leaf)
        folder.remove(validatorName(leaf))
    }

    /// Takes a 2xx response head: opens the partial file to append (a 206 for the bytes asked for)
    /// or from zero (anything else). A 206 for other bytes writes nothing: `.mismatch`.
    public func begin(status: Int, headers: HTTPFields) throws(TransferError) -> ResumeRule.Outcome {
        let contentRange = headers[values: .contentRange].first
        let outcome = ResumeRule.outcome(status: status, contentRange: contentRange, requestedFrom: resumeFrom)
        let length = headers[values: .contentLength].first.flatMap { Int64($0) }
        switch outcome {
        case .mismatch:
            return .mismatch
        case .append:
            // "bytes START-END/TOTAL"; a TOTAL of * leaves it unknown.
            expectedSize = contentRange.flatMap { Int64($0.split(separator: "/").last ?? "") }
                ?? length.map { resumeFrom + $0 }
            try open(truncatingTo: resumeFrom)
        case .restart:
            expectedSize = length
            try open(truncatingTo: 0)
            // The new version's validators, before any of its bytes.
            let header = { (name: HTTPField.Name) in headers[values: name].first ?? "" }
            let text = header(.eTag) + "\n" + header(.lastModified) + "\n"
            try folder?.write(DownloadFile.validatorName(partialLeaf), Array(text.utf8))
        }
        return outcome
    }

    private func open(truncatingTo offset: Int64) throws(TransferError) {
        close()
        let (folder, leaf) = try PluginFolder.holding(partialName, in: root, create: true)
        self.folder = folder
        self.partialLeaf = leaf
        self.leaf = String(name.split(separator: "/").last ?? "")
        // Opened without following a link: one planted as the partial file is refused, never written through.
        fd = folder.open(leaf, O_WRONLY | O_CREAT)
        guard fd >= 0 else { throw TransferError("cannot open '\(partialName)': \(errnoText())") }
        guard ftruncate(fd, off_t(offset)) == 0, lseek(fd, off_t(offset), SEEK_SET) == offset else {
            throw TransferError("cannot prepare '\(partialName)': \(errnoText())")
        }
        size = offset
    }

    /// Appends body bytes.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TransferError) {
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR { continue }
                throw TransferError("cannot write '\(partialName)': \(errnoText())")
            }
            offset += n
        }
        size += Int64(bytes.count)
    }

    /// Appends `count` zero bytes without writing them (a sparse file): the scripted network's
    /// bodies, which are all zeros.
    public func appendZeros(_ count: Int64) throws(TransferError) {
        guard ftruncate(fd, off_t(size + count)) == 0 else {
            throw TransferError("cannot extend '\(partialName)': \(errnoText())")
        }
        size += count
        lseek(fd, off_t(size), SEEK_SET)
    }

    /// How `finish` came out.
    public enum Finish: Equatable, Sendable {
        /// The file is in place under its final name.
        case placed
        /// Fewer bytes than announced arrived (a short range, say): the partial file stays, and
        /// the next attempt resumes from it.
        case incomplete(String)
        /// The file does not check out (more bytes than announced, sha256), and was removed; or it
        /// could not be renamed.
        case rejected(String)

        /// What a transport reports for it.
        public var result: TransferAttemptResult? {
            switch self {
            case .placed: return nil
            case .incomplete(let why): return .failed(HTTPFailure(.connect, why))
            case .rejected(let why): return .fileFailed(why)
            }
        }
    }

    /// The body is complete: checks the size against the head's and the SHA-256 against
    /// `sha256`, then renames the partial file to the final name.
    ///
    /// No fsync: like the state database (WAL, synchronous = NORMAL), a finished file survives the
    /// host's crash or SIGKILL, not a power loss; syncing 200 MB would cost more than the download.
    public func finish(sha256: String?) -> Finish {
        close()
        guard let folder else { return .rejected("'\(partialName)' was never opened") }
        if let expectedSize, size < expectedSize {
            return .incomplete("the body ended after \(size) of \(expectedSize) bytes")
        }
        if let expectedSize, size > expectedSize {
            discard()
            return .rejected("the file has \(size) bytes, but the server announced \(expectedSize)")
        }
        if let sha256 {
            let file = folder.open(partialLeaf, O_RDONLY)
            guard file >= 0, let digest = DownloadFile.sha256(of: file) else {
                if file >= 0 { Glibc.close(file) }
                return .rejected("cannot read '\(partialName)' to check its sha256")
            }
            Glibc.close(file)
            guard digest == sha256.lowercased() else {
                discard()
                return .rejected("sha256 mismatch: expected \(sha256.lowercased()), got \(digest)")
            }
        }
        do throws(TransferError) {
            try folder.rename(partialLeaf, to: leaf)
        } catch {
            return .rejected(error.message)
        }
        folder.remove(DownloadFile.validatorName(partialLeaf))
        return .placed
    }

    private func discard() {
        folder?.remove(partialLeaf)
        folder?.remove(DownloadFile.validatorName(partialLeaf))
    }

    /// Closes the file and keeps what it holds, for a later resume.
    public func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    /// The SHA-256 of a file, lowercase hex; nil if it cannot be read.
    public static func sha256(ofFile path: String) -> String? {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { Glibc.close(fd) }
        return sha256(of: fd)
    }

    /// The SHA-256 of what is left to read from `fd`, lowercase hex; nil if it cannot be read.
    static func sha256(of fd: Int32) -> String? {
        var hasher = SHA256()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 20, alignment: 16)
        defer { buffer.deallocate() }
        while true {
            let n = read(fd, buffer.baseAddress!, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { return nil }
            if n == 0 { break }
            hasher.update(bufferPointer: UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
        }
        return hasher.finalize().map { String(format: "%02x", $0) }.joined()
    }

    private func errnoText() -> String { String(cString: strerror(errno)) }
}

#if canImport(Glibc)
import Glibc
#endif
