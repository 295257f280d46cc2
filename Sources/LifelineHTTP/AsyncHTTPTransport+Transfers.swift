#if canImport(Glibc)
import Glibc
#endif
import AsyncHTTPClient
import Foundation
import Lifeline
import NIOCore
import NIOHTTP1
import Synchronization

/// Background transfers on async-http-client: a download streams its body into the
/// partial file through `DownloadFile`, on the connection's event loop, and gets its final name
/// only once verified; an upload sends its file. There is no overall timeout, since a large file
/// may take long, but a transfer that receives nothing for `transferIdleTimeout` seconds fails
/// with `timeout` (and is retried by the host).
extension AsyncHTTPTransport: TransferTransport {
    public func transfer(
        _ attempt: TransferAttempt, report: @escaping @Sendable (TransferReport) -> Void,
        completion: @escaping @Sendable (TransferAttemptResult) -> Void
    ) -> any HTTPCancellable {
        let url = attempt.request.url
        guard !isShutDown.withLock({ $0 }) else {
            completion(.failed(HTTPFailure(.connect, "cannot reach \(url): the HTTP client was shut down")))
            return NothingToCancel()
        }
        let context = FailureContext(url: url, timeout: transferIdleTimeout, connectTimeout: connectTimeout)
        let outgoing: HTTPClient.Request
        var uploadSize: Int64 = 0
        do {
            let headers = HTTPHeaders(attempt.request.headers)
            var body: HTTPClient.Body?
            if attempt.kind == .upload {
                // Sent as it is read, a chunk at a time: a file of any size (a download uploaded
                // again, say) costs the host one chunk, not its whole length.
                let file = UploadFile(try attempt.openUpload())
                let size = file.open.size
                uploadSize = size
                body = .stream(contentLength: size) { writer in
                    // From the start each time the client sends the body (a redirect sends it again).
                    guard file.open.rewind() else {
                        return writer.write(.byteBuffer(ByteBuffer())).flatMapThrowing { throw file.open.readError() }
                    }
                    return AsyncHTTPTransport.send(file, left: size, to: writer)
                }
            }
            outgoing = try HTTPClient.Request(
                url: url, method: HTTPMethod(rawValue: attempt.request.method), headers: headers, body: body)
        } catch let error as TransferError {
            completion(.fileFailed(error.message))
            return NothingToCancel()
        } catch {
            completion(.failed(AsyncHTTPTransport.failure(for: error, context)))
            return NothingToCancel()
        }
        let streamer = Streamer(attempt: attempt, uploadSize: uploadSize, report: report)
        let task = client.execute(request: outgoing, delegate: streamer)
        // Stalls: a check every quarter of the idle timeout.
        let idle = AsyncHTTPTransport.amount(seconds: transferIdleTimeout)
        let quarter = TimeAmount.nanoseconds(idle.nanoseconds / 4)
        let check = task.eventLoop.scheduleRepeatedTask(initialDelay: quarter, delay: quarter) { _ in
            if streamer.idleSince(NIODeadline.now()) > idle {
                streamer.stalled = true
                task.cancel()
            }
        }
        task.futureResult.whenComplete { result in
            check.cancel()
            streamer.close()
            switch result {
            case .success(let outcome):
                completion(outcome)
            case .failure(let error as TransferError):
                completion(.fileFailed(error.message))
            case .failure(is RangeMismatch):
                completion(.rangeMismatch)
            case .failure where streamer.stalled:
                completion(
                    .failed(
                        HTTPFailure(
                            .timeout,
                            "nothing arrived from \(url) for \(ReportNumber.seconds(self.transferIdleTimeout)) s")))
            case .failure(let error):
                completion(.failed(AsyncHTTPTransport.failure(for: error, context)))
            }
        }
        return TransferCancellation(task: task)
    }
}

/// A 206 for other bytes than the ones asked for.
private struct RangeMismatch: Error {}

private struct TransferCancellation: HTTPCancellable {
    let task: HTTPClient.Task<TransferAttemptResult>
    func cancel() { task.cancel() }
}

/// Streams one transfer's response. Touched on the request's event loop only, but for
/// `idleSince` and `stalled`, which the loop's own scheduled task reads.
private final class Streamer: HTTPClientResponseDelegate, @unchecked Sendable {
    typealias Response = TransferAttemptResult

    private let attempt: TransferAttempt
    private let uploadSize: Int64
    private let report: @Sendable (TransferReport) -> Void
    private var file: DownloadFile?
    private var status = 0
    private var headers = HTTPFields()
    private var lastActivity = NIODeadline.now()
    private var reportedAt: Int64 = 0
    var stalled = false

    /// Progress is posted at most once per this many bytes; the host throttles it further.
    private static let reportEvery: Int64 = 1 << 20

    init(attempt: TransferAttempt, uploadSize: Int64, report: @escaping @Sendable (TransferReport) -> Void) {
        self.attempt = attempt
        self.uploadSize = uploadSize
        self.report = report
    }

    func idleSince(_ now: NIODeadline) -> TimeAmount { now - lastActivity }

    func close() { file?.close() }

    func didSendRequestPart(task: HTTPClient.Task<Response>, _ part: IOData) {
        lastActivity = .now()
    }

    func didSendRequest(task: HTTPClient.Task<Response>) {
        if attempt.kind == .upload { report(.progress(bytes: uploadSize, total: uploadSize)) }
    }

    func didReceiveHead(task: HTTPClient.Task<Response>, _ head: HTTPResponseHead) -> EventLoopFuture<Void> {
        lastActivity = .now()
        status = Int(head.status.code)
        headers = HTTPFields(head.headers)
        guard attempt.kind == .download, (200..<300).contains(status) else {
            return task.eventLoop.makeSucceededVoidFuture()
        }
        let file = DownloadFile(attempt)
        do throws(TransferError) {
            if try file.begin(status: status, headers: headers) == .mismatch {
                return task.eventLoop.makeFailedFuture(RangeMismatch())
            }
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        self.file = file
        report(.progress(bytes: file.size, total: file.expectedSize))
        reportedAt = file.size
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didReceiveBodyPart(task: HTTPClient.Task<Response>, _ buffer: ByteBuffer) -> EventLoopFuture<Void> {
        lastActivity = .now()
        guard let file else { return task.eventLoop.makeSucceededVoidFuture() }  // an error body: dropped
        do throws(TransferError) {
            var failure: TransferError?
            buffer.withUnsafeReadableBytes { bytes in
                do throws(TransferError) { try file.write(bytes) } catch { failure = error }
            }
            if let failure { throw failure }
        } catch {
            return task.eventLoop.makeFailedFuture(error)
        }
        if file.size - reportedAt >= Streamer.reportEvery {
            reportedAt = file.size
            report(.progress(bytes: file.size, total: file.expectedSize))
        }
        return task.eventLoop.makeSucceededVoidFuture()
    }

    func didFinishRequest(task: HTTPClient.Task<Response>) throws -> Response {
        guard let file else {
            return .response(status: status, headers: headers, bytes: attempt.kind == .upload ? uploadSize : 0)
        }
        return file.finish(sha256: attempt.sha256).result ?? .response(status: status, headers: headers, bytes: file.size)
    }
}

extension AsyncHTTPTransport {
    /// The bytes of a file's chunk at a time.
    static let uploadChunkBytes = 1 << 16

    /// Writes the next `left` bytes of `file` to `writer`, one chunk after the last was taken. The
    /// request promised its length: a file that shrank meanwhile fails the attempt (which retries),
    /// and one that grew is sent only up to the promised length.
    static func send(_ file: UploadFile, left: Int64, to writer: HTTPClient.Body.StreamWriter) -> EventLoopFuture<Void> {
        var buffer = ByteBuffer()
        let want = Int(min(Int64(uploadChunkBytes), left))
        var failure: TransferError?
        if want > 0 {
            buffer.reserveCapacity(want)
            let n = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: want) { raw in
                while true {
                    let n = Glibc.read(file.open.fd, raw.baseAddress, want)
                    if n < 0 && errno == EINTR { continue }
                    return max(n, 0)
                }
            }
            if n == 0 { failure = TransferError("'\(file.open.name)' changed while it was being sent") }
        }
        let written = writer.write(.byteBuffer(buffer))
        if let failure { return written.flatMapThrowing { throw failure } }
        let rest = left - Int64(buffer.readableBytes)
        return rest <= 0 ? written : written.flatMap { send(file, left: rest, to: writer) }
    }
}

/// An upload's open file, handed to the HTTP client's body stream. The client calls the stream,
/// and each chunk's continuation, one after another on the request's event loop, so the file is
/// never read from two threads at once.
final class UploadFile: @unchecked Sendable {
    let open: OpenFile
    init(_ open: OpenFile) { self.open = open }
}
