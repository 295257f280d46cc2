#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Lifeline

/// Where `--metrics` serves: `HOST:PORT`, `[IPV6]:PORT`, `:PORT` or `PORT`. With no host it is
/// 127.0.0.1, so the page is not on the network unless asked for; `0.0.0.0:9464` serves every
/// interface. The host is an IP address or `localhost`: a name is not looked up. Port 0 takes a
/// free port, which the server prints.
public struct MetricsAddress: Equatable, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int

    /// The host when none is given.
    public static let defaultHost = "127.0.0.1"

    public init(host: String = MetricsAddress.defaultHost, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `text`, or throws a usage error (exit 64) that says what is wrong and what is asked.
    public init(parsing text: String) throws(LifelineError) {
        func bad(_ why: String) -> LifelineError {
            .usage("--metrics '\(text)': \(why); give HOST:PORT, :PORT or PORT, e.g. 127.0.0.1:9464")
        }
        var hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { throw bad("the IPv6 address has no closing ']'") }
            hostPart = text[text.index(after: text.startIndex)..<close]
            // Brackets are for an IPv6 address only, as in a URL: [127.0.0.1] is not one.
            guard hostPart.contains(":") else { throw bad("brackets hold an IPv6 address, e.g. [::1]:9464") }
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { throw bad("no port after the IPv6 address") }
            portPart = rest.dropFirst()
        } else if let colon = text.lastIndex(of: ":") {
            hostPart = text[..<colon]
            portPart = text[text.index(after: colon)...]
            if hostPart.contains(":") { throw bad("an IPv6 address goes in brackets, e.g. [::1]:9464") }
        } else {
            hostPart = ""
            portPart = Substring(text)
        }
        guard !portPart.isEmpty, portPart.allSatisfy(\.isASCII), portPart.allSatisfy(\.isNumber),
            let port = Int(portPart), (0...65_535).contains(port)
        else { throw bad("the port must be a number from 0 to 65535") }
        if hostPart.isEmpty { hostPart = Substring(Self.defaultHost) }
        if hostPart == "localhost" { hostPart = Substring(Self.defaultHost) }
        let host = String(hostPart)
        guard Self.isIPv4(host) || Self.isIPv6(host) else {
            throw bad("'\(host)' is not an IP address (a host name is not looked up)")
        }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    static func isIPv4(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4
            && parts.allSatisfy { part in
                !part.isEmpty && part.count <= 3 && part.allSatisfy { $0.isASCII && $0.isNumber }
                    && Int(part).map { $0 <= 255 } == true
            }
    }

    static func isIPv6(_ text: String) -> Bool {
        // inet_pton decides; the characters are checked first so nothing odd reaches it.
        guard !text.isEmpty, text.contains(":"),
            text.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." })
        else { return false }
        var address = in6_addr()
        return inet_pton(AF_INET6, text, &address) == 1
    }
}
