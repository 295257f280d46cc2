extension String {
    /// This text with each Unicode scalar that `replacement` maps to a string replaced by it; the
    /// scalars it maps to nil are kept. The escapers of every format the host writes (HTML, XML,
    /// JSON inside a script, a terminal) are this loop with their own table.
    public func replacingScalars(_ replacement: (Unicode.Scalar) -> String?) -> String {
        var out = ""
        out.reserveCapacity(utf8.count)
        for scalar in unicodeScalars {
            if let text = replacement(scalar) { out += text } else { out.unicodeScalars.append(scalar) }
        }
        return out
    }
}
