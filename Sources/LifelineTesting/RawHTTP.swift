#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A GET (or another method) to 127.0.0.1 over a plain socket, as a scraper sends it: the
/// status and the body.
public func httpRequest(port: Int, path: String, method: String = "GET") throws -> (status: Int, body: String) {
    let (status, _, body) = try httpExchange(port: port, path: path, method: method)
    return (status, body)
}

/// `httpRequest` with the answer's head too: its status line and header lines, as sent.
public func httpExchange(port: Int, path: String, method: String = "GET") throws -> (status: Int, head: String, body: String) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw POSIXError(.EIO) }
    defer { close(fd) }
    var timeout = timeval(tv_sec: 10, tv_usec: 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    let request = "\(method) \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"
    _ = request.withCString { send(fd, $0, strlen($0), 0) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        bytes.append(contentsOf: buffer[..<n])
    }
    let text = String(decoding: bytes, as: UTF8.self)
    guard let split = text.range(of: "\r\n\r\n") else { throw POSIXError(.EBADMSG) }
    let statusLine = text[..<split.lowerBound].split(separator: "\r\n").first ?? ""
    let parts = statusLine.split(separator: " ")
    guard parts.count >= 2, let status = Int(parts[1]) else { throw POSIXError(.EBADMSG) }
    return (status, String(text[..<split.lowerBound]), String(text[split.upperBound...]))
}
