import Lifeline
import NIOHTTP1

// The host's headers are HTTPFields; async-http-client speaks NIO's HTTPHeaders. Both keep the
// fields in order and the names in the case they were given.
extension HTTPHeaders {
    init(_ fields: HTTPFields) {
        self.init(fields.map { ($0.name.rawName, $0.value) })
    }
}

extension HTTPFields {
    /// Values are taken leniently, byte for byte as NIO parsed them. A name that is not a token
    /// cannot come from NIO's parser, which refuses such a response; it is skipped.
    init(_ headers: HTTPHeaders) {
        self.init()
        for (name, value) in headers {
            guard let name = HTTPField.Name(name) else { continue }
            append(HTTPField(name: name, lenientValue: value.utf8))
        }
    }
}
