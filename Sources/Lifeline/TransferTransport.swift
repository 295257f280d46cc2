import Crypto
import Foundation

/// One attempt at a background transfer, as the host hands it to a transport.
public struct TransferAttempt: Sendable {
    public var kind: TransferRecord.Kind
    /// Method, URL and headers: for a resumed download, Range and If-Range (`ResumeRule`).
    public var request: HTTPRequest
    /// A download's final path: the bytes go to `DownloadFile.partialPath(path)` until they are
    /// verified. An upload's file to send.
    public var path: String
    /// The bytes already in the partial file, which the request's Range asks the rest after.
    public var resumeFrom: Int64
    /// The expected SHA-256 of a download, lowercase hex.
    public var sha256: String?

    public init(kind: TransferRecord.Kind, request: HTTPRequest, path: String, resumeFrom: Int64, sha256: String?) {
        self.kind = kind
        self.request = request
        self.path = path
        self.resumeFrom = resumeFrom
        self.sha256 = sha256
    }
}

/// What a transport tells the host while an attempt runs, from any thread.
public enum TransferReport: Sendable {
    /// A download's response head, before any body byte is written: the host saves the validators
    /// at once, so a resume after a crash knows which version the partial file holds.
    case head(status: Int, headers: [HTTPHeader])
    /// Bytes in the partial file (download) or sent (upload) so far, and the whole size once known.
    case progress(bytes: Int64, total: Int64?)
}

/// How an attempt ended.
public enum TransferAttemptResult: Sendable, Equatable {
    /// The server answered. For a 2xx download the file is complete, verified and under its final
    /// name; for any other status nothing was written.
    case response(status: Int, headers: [HTTPHeader], bytes: Int64)
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
/// bytes go to `NAME.partial`; a resumed response is appended only when it starts where the file
/// ends (`ResumeRule`); the file gets its final name by an atomic rename once its size (and its
/// SHA-256, when given) check out.
///
/// Threading: one thread at a time (the transport's).
public final class DownloadFile: @unchecked Sendable {
    public let finalPath: String
    public let partialPath: String
    private let resumeFrom: Int64
    private var fd: Int32 = -1
    /// Bytes in the partial file.
    public private(set) var size: Int64
    /// The whole size, from the response head, when it says.
    public private(set) var expectedSize: Int64?

    /// Where the bytes of `finalPath` go until they are verified.
    public static func partialPath(_ finalPath: String) -> String { finalPath + ".partial" }

    public init(finalPath: String, resumeFrom: Int64) {
        self.finalPath = finalPath
        self.partialPath = DownloadFile.partialPath(finalPath)
        self.resumeFrom = resumeFrom
        self.size = resumeFrom
    }

    deinit { close() }

    /// The bytes already in the partial file at `finalPath`: where a download resumes.
    public static func partialSize(_ finalPath: String) -> Int64 {
        var st = stat()
        return stat(partialPath(finalPath), &st) == 0 ? Int64(st.st_size) : 0
    }

    /// Takes a 2xx response head: opens the partial file to append (a 206 for the bytes asked for)
    /// or from zero (anything else). A 206 for other bytes writes nothing: `.mismatch`.
    public func begin(status: Int, headers: [HTTPHeader]) throws(TransferError) -> ResumeRule.Outcome {
        let contentRange = headers.first { $0.name.lowercased() == "content-range" }?.value
        let outcome = ResumeRule.outcome(status: status, contentRange: contentRange, requestedFrom: resumeFrom)
        let length = headers.first { $0.name.lowercased() == "content-length" }.flatMap { Int64($0.value) }
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
        }
        return outcome
    }

    private func open(truncatingTo offset: Int64) throws(TransferError) {
        close()
        let folder = (partialPath as NSString).deletingLastPathComponent
        try? FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        // O_NOFOLLOW: a link planted as the partial file is refused, never written through.
        fd = Glibc.open(partialPath, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw TransferError("cannot open '\(partialPath)': \(errnoText())") }
        guard ftruncate(fd, off_t(offset)) == 0, lseek(fd, off_t(offset), SEEK_SET) == offset else {
            throw TransferError("cannot prepare '\(partialPath)': \(errnoText())")
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
                throw TransferError("cannot write '\(partialPath)': \(errnoText())")
            }
            offset += n
        }
        size += Int64(bytes.count)
    }

    /// Appends `count` zero bytes without writing them (a sparse file): the scripted network's
    /// bodies, which are all zeros.
    public func appendZeros(_ count: Int64) throws(TransferError) {
        guard ftruncate(fd, off_t(size + count)) == 0 else {
            throw TransferError("cannot extend '\(partialPath)': \(errnoText())")
        }
        size += count
        lseek(fd, off_t(size), SEEK_SET)
    }

    /// The body is complete: checks the size against the head's and the SHA-256 against
    /// `sha256`, then renames the partial file to the final name. A file that does not check out
    /// is removed and the reason returned; nil when the file is in place.
    ///
    /// No fsync: like the state database (WAL, synchronous = NORMAL), a finished file survives the
    /// host's crash or SIGKILL, not a power loss; syncing 200 MB would cost more than the download.
    public func finish(sha256: String?) -> String? {
        close()
        if let expectedSize, expectedSize != size {
            unlink(partialPath)
            return "the file has \(size) bytes, but the server announced \(expectedSize)"
        }
        if let sha256 {
            guard let digest = DownloadFile.sha256(ofFile: partialPath) else {
                return "cannot read '\(partialPath)' to check its sha256"
            }
            guard digest == sha256.lowercased() else {
                unlink(partialPath)
                return "sha256 mismatch: expected \(sha256.lowercased()), got \(digest)"
            }
        }
        guard rename(partialPath, finalPath) == 0 else {
            return "cannot rename '\(partialPath)' to '\(finalPath)': \(errnoText())"
        }
        return nil
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
