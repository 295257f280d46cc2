import Foundation

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
