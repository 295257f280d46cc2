import Foundation

/// One HTTP header line.
public struct HTTPHeader: Equatable, Sendable {
    public var name: String
    public var value: String
    public init(_ name: String, _ value: String) {
        self.name = name
        self.value = value
    }

    /// Whether the pair can go on the wire as one header line: the name is an RFC 9110 token,
    /// and the value holds no NUL, CR or LF (which would cut the line or start another).
    public static func isValid(name: String, value: String) -> Bool {
        let tokenPunctuation = Set("!#$%&'*+-.^_`|~".utf8)
        return !name.isEmpty
            && name.utf8.allSatisfy { ($0 >= 0x30 && $0 <= 0x39) || ($0 | 0x20 >= 0x61 && $0 | 0x20 <= 0x7A) || tokenPunctuation.contains($0) }
            && !value.utf8.contains { $0 == 0 || $0 == 0x0D || $0 == 0x0A }
    }
}

/// A request a plugin makes: Lua's `lifeline.http.request{...}` and Swift's
/// `PluginContext.http(_:)` build the same value.
public struct HTTPRequest: Equatable, Sendable {
    public var method: String
    public var url: String
    public var headers: [HTTPHeader]
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
        method: String = "GET", url: String, headers: [HTTPHeader] = [], body: [UInt8] = [],
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
    public var headers: [HTTPHeader]
    public var body: [UInt8]

    public init(status: Int, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The first header of that name (case-insensitive).
    public func header(_ name: String) -> String? {
        headers.first { $0.name.caseInsensitiveCompare(name) == .orderedSame }?.value
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

/// Stops an exchange that is under way. After `cancel()`, the transport may still call the
/// completion; the host ignores it.
public protocol HTTPCancellable: Sendable {
    func cancel()
}

/// One HTTP exchange on the wire: no redirects, no permissions, no timeout of its own beyond the
/// request's (the host applies all three). The core owns this interface; `lifeline run` plugs in
/// a real client (async-http-client), `lifeline simulate` the scenario's scripted network.
public protocol HTTPTransport: AnyObject, Sendable {
    /// Starts one exchange. Calls `completion` at most once, from any thread. It must stop reading
    /// the body past `request.maximumBodyBytes` and fail with `tooLarge`, and it must not follow
    /// redirects.
    func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable
}

/// A transport for hosts with no network: every request is refused.
public final class NoNetworkTransport: HTTPTransport {
    public init() {}
    public func send(
        _ request: HTTPRequest, completion: @escaping @Sendable (Result<HTTPResponse, HTTPFailure>) -> Void
    ) -> any HTTPCancellable {
        completion(.failure(HTTPFailure(.connect, "this host has no network transport")))
        return NothingToCancel()
    }
}

/// A cancellable that has nothing to stop.
public struct NothingToCancel: HTTPCancellable {
    public init() {}
    public func cancel() {}
}

/// The parts of an http or https URL that rules and permissions look at.
public struct HTTPURL: Equatable, Sendable {
    public var scheme: String
    public var host: String
    public var port: Int
    /// The path and query, starting with "/".
    public var path: String

    /// nil unless `text` is an absolute http:// or https:// URL with a host.
    public init?(_ text: String) {
        guard let components = URLComponents(string: text), let scheme = components.scheme?.lowercased(),
            scheme == "http" || scheme == "https", let host = components.host, !host.isEmpty
        else { return nil }
        self.scheme = scheme
        self.host = host.lowercased()
        self.port = components.port ?? (scheme == "https" ? 443 : 80)
        let path = components.percentEncodedPath.isEmpty ? "/" : components.percentEncodedPath
        self.path = path + (components.percentEncodedQuery.map { "?" + $0 } ?? "")
    }

    /// Where a redirect's `Location` leads from `base` (it may be relative).
    public static func resolve(_ location: String, against base: String) -> String? {
        guard let baseURL = URL(string: base), let target = URL(string: location, relativeTo: baseURL) else {
            return nil
        }
        return target.absoluteString
    }
}

/// plugin.toml's `[permissions] network`: the hosts a plugin may reach. Denied by default.
///
/// Each pattern is `HOST:PORT`. HOST may hold `*` (any run of characters: `*.example.com`, or `*`
/// alone); PORT is a number or `*`. A pattern without a port allows the default ports, 80 and 443.
public struct NetworkPermissions: Equatable, Sendable {
    public private(set) var patterns: [String]

    /// Nothing is allowed.
    public static let none = NetworkPermissions()

    public init() { patterns = [] }

    /// Checks each pattern's shape; throws a message naming the bad one.
    public init(_ patterns: [String]) throws(LifelineError) {
        for pattern in patterns {
            let (host, port) = NetworkPermissions.split(pattern)
            guard !host.isEmpty, !host.contains("/"), !host.contains(" "),
                port == nil || port == "*" || (Int(port!).map { (1...65535).contains($0) } ?? false)
            else {
                throw .badInput(
                    "[permissions] network: '\(pattern)' is not HOST:PORT (for example \"127.0.0.1:*\" or "
                        + "\"api.example.com:443\")")
            }
        }
        self.patterns = patterns
    }

    /// Why a plugin may not reach `host`:`port`, and the line of plugin.toml that would let it.
    static func denial(plugin: String, host: String, port: Int) -> String {
        let hostPort = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        return "plugin '\(plugin)' may not reach \(hostPort): list it in the plugin's plugin.toml under "
            + "[permissions] network, as in network = [\"\(hostPort)\"]"
    }

    private static func split(_ pattern: String) -> (host: String, port: String?) {
        // An IPv6 literal in brackets keeps its colons.
        if pattern.hasPrefix("["), let close = pattern.firstIndex(of: "]") {
            let host = String(pattern[pattern.index(after: pattern.startIndex)..<close]).lowercased()
            let rest = pattern[pattern.index(after: close)...]
            return (host, rest.hasPrefix(":") ? String(rest.dropFirst()) : nil)
        }
        guard let colon = pattern.lastIndex(of: ":") else { return (pattern.lowercased(), nil) }
        return (String(pattern[..<colon]).lowercased(), String(pattern[pattern.index(after: colon)...]))
    }

    /// Whether `host:port` is allowed.
    public func allows(host: String, port: Int) -> Bool {
        let host = host.lowercased()
        return patterns.contains { pattern in
            let (h, p) = NetworkPermissions.split(pattern)
            let portOK: Bool
            switch p {
            case nil: portOK = port == 80 || port == 443
            case "*": portOK = true
            case let p?: portOK = Int(p) == port
            }
            return portOK && Glob.matches(h, host)
        }
    }
}

/// `*` matches any run of characters (none included); everything else matches itself.
public enum Glob {
    public static func matches(_ pattern: String, _ text: String) -> Bool {
        let p = Array(pattern.utf8), t = Array(text.utf8)
        var pi = 0, ti = 0
        var star = -1, mark = 0
        while ti < t.count {
            if pi < p.count && p[pi] == UInt8(ascii: "*") {
                star = pi
                mark = ti
                pi += 1
            } else if pi < p.count && p[pi] == t[ti] {
                pi += 1
                ti += 1
            } else if star >= 0 {
                pi = star + 1
                mark += 1
                ti = mark
            } else {
                return false
            }
        }
        while pi < p.count && p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }
}
