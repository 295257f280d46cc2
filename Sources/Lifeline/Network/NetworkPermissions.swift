import Foundation

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
