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
    /// Linear in the two lengths: the pattern's first part must start the text and its last part
    /// end it, and each part between stars is found, in order, at its first place after the one
    /// before (the first place is never worse for what follows). Going back to the last star on each
    /// mismatch, as before, took time that grew with the product of the lengths.
    public static func matches(_ pattern: String, _ text: String) -> Bool {
        let t = Array(text.utf8)
        let parts = Array(pattern.utf8).split(separator: UInt8(ascii: "*"), omittingEmptySubsequences: false)
        guard parts.count > 1 else { return parts[0].elementsEqual(t) }
        let first = parts[0], last = parts[parts.count - 1]
        guard first.count + last.count <= t.count, t.starts(with: first), t.suffix(last.count).elementsEqual(last)
        else { return false }
        var from = first.count
        for part in parts.dropFirst().dropLast() where !part.isEmpty {
            guard let found = find(Array(part), in: t, from: from, to: t.count - last.count) else { return false }
            from = found + part.count
        }
        return true
    }

    /// Where `needle` (not empty) first lies wholly within `t[from..<end]`, by Knuth, Morris and Pratt.
    private static func find(_ needle: [UInt8], in t: [UInt8], from: Int, to end: Int) -> Int? {
        // fallback[i]: the length of the longest proper prefix of needle[...i] that also ends it.
        var fallback = [Int](repeating: 0, count: needle.count)
        var k = 0
        for i in needle.indices.dropFirst() {
            while k > 0 && needle[i] != needle[k] { k = fallback[k - 1] }
            if needle[i] == needle[k] { k += 1 }
            fallback[i] = k
        }
        k = 0
        var i = from
        while i < end {
            while k > 0 && t[i] != needle[k] { k = fallback[k - 1] }
            if t[i] == needle[k] { k += 1 }
            i += 1
            if k == needle.count { return i - k }
        }
        return nil
    }
}
