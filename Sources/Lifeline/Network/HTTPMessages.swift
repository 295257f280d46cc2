import Foundation

// Headers are swift-http-types' HTTPFields: names compare case-insensitively and keep the case
// they were given, fields keep their order, and a name repeats as often as it was added. The two
// types are re-exported so that plugins and tests name them without importing HTTPTypes, whose own
// HTTPRequest and HTTPResponse would clash with the ones below.
@_exported import struct HTTPTypes.HTTPField
@_exported import struct HTTPTypes.HTTPFields

extension HTTPField {
    /// Whether a value can go on the wire as it is: it holds no NUL, CR or LF (which would cut the
    /// line or start another). Looser than `isValidValue`, which also refuses other control bytes
    /// and surrounding white space; the host has always sent those unchanged.
    public static func isSendable(value: String) -> Bool {
        !value.utf8.contains { $0 == 0 || $0 == 0x0D || $0 == 0x0A }
    }
}

/// A request a plugin makes: Lua's `lifeline.http.request{...}` and Swift's
/// a plugin context's `http(_:)` build the same value.
public struct HTTPRequest: Equatable, Sendable {
    public var method: String
    public var url: String
    public var headers: HTTPFields
    public var body: [UInt8]
    /// Seconds for the whole exchange, redirects included, on the host's clock.
    public var timeout: Double
    /// The most body bytes the host accepts; a longer response fails with `tooLarge`.
    public var maximumBodyBytes: Int

    /// iOS's default (`URLRequest.timeoutInterval`).
    public static let defaultTimeout: Double = 60
    public static let defaultMaximumBodyBytes = 10 * 1024 * 1024
    /// Redirects the host follows before it fails with `redirect`.
    public static let maximumRedirects = 5

    public init(
        method: String = "GET", url: String, headers: HTTPFields = [:], body: [UInt8] = [],
        timeout: Double = HTTPRequest.defaultTimeout, maximumBodyBytes: Int = HTTPRequest.defaultMaximumBodyBytes
    ) {
        self.method = method.uppercased()
        self.url = url
        self.headers = headers
        self.body = body
        self.timeout = timeout
        self.maximumBodyBytes = maximumBodyBytes
    }
}

/// What came back.
public struct HTTPResponse: Equatable, Sendable {
    public var status: Int
    public var headers: HTTPFields
    public var body: [UInt8]

    public init(status: Int, headers: HTTPFields = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header of that name (case-insensitive); nil also for a name that is not a token.
    public func header(_ name: String) -> String? {
        HTTPField.Name(name).flatMap { headers[values: $0].first }
    }

    /// The body as UTF-8 text (invalid bytes replaced).
    public var text: String { String(decoding: body, as: UTF8.self) }
}

/// Why a request failed. Lua sees `err.kind` and `err.message`.
public struct HTTPFailure: Error, Equatable, Sendable, CustomStringConvertible {
    public enum Kind: String, Sendable, CaseIterable {
        /// The timeout passed before the response was complete.
        case timeout
        /// The connection could not be made, or it closed before the response was complete.
        case connect
        /// TLS could not be set up.
        case tls
        /// The body is longer than the cap.
        case tooLarge
        /// plugin.toml's `[permissions] network` does not list the host.
        case notPermitted
        /// More redirects than `HTTPRequest.maximumRedirects`, or a redirect to a bad location.
        case redirect
        /// The background task the request ran under expired.
        case expired
        /// The request was cancelled: by `task:cancel()`, by Swift task cancellation, or because
        /// the app ended.
        case cancelled
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}
