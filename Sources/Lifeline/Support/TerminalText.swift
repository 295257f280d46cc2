/// Text for an operator's terminal that may hold a plugin's words (an error message, a log line).
public enum TerminalText {
    /// `text` made harmless for a terminal: a control character (ESC and the rest of C0 but tab and
    /// line feed, DEL, C1) shows as `\u{1B}` rather than acting, so a plugin cannot recolour,
    /// retitle or rewrite the operator's screen; each line break is followed by `indent`, so a
    /// plugin's second line never passes for one of the host's.
    public static func safe(_ text: String, indent: String = "") -> String {
        text.replacingScalars { scalar in
            let v = scalar.value
            if scalar == "\n" { return "\n" + indent }
            if (v < 0x20 && scalar != "\t") || (v >= 0x7F && v < 0xA0) {
                return "\\u{" + String(v, radix: 16, uppercase: true) + "}"
            }
            return nil
        }
    }
}
