/// JUnit XML for `lifeline test --junit`, the format CI systems read test results in (GitLab,
/// Jenkins, GitHub's test reporters): one suite, one test case per scenario.
///
/// ```
/// <testsuites tests="2" failures="1" time="0.310">
///   <testsuite name="lifeline" tests="2" failures="1" errors="0" skipped="0" time="0.310">
///     <testcase classname="save-changes" name="save" time="0.120"/>
///     <testcase classname="sync" name="expiration" time="0.190">
///       <failure message="…">…</failure>
///       <system-err>…</system-err>
///     </testcase>
///   </testsuite>
/// </testsuites>
/// ```
enum JUnit {
    /// One scenario's verdict.
    struct Case {
        /// The plugin (the folder's name).
        var classname: String
        /// The scenario's file name without `.scenario`.
        var name: String
        var seconds: Double
        /// The failure lines, the first one the headline; empty when it passed.
        var failure: [String]
        /// What the process wrote on stderr (the plugins' log), kept for failures.
        var stderr: String
    }

    /// The most of a failed case's stderr kept, from its end: CI pages choke on megabytes.
    static let stderrLimit = 64 * 1024

    /// The document, `time` the whole run's seconds.
    static func xml(_ cases: [Case], seconds: Double) -> String {
        let failures = cases.filter { !$0.failure.isEmpty }.count
        let counts = "tests=\"\(cases.count)\" failures=\"\(failures)\""
        var out = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        out += "<testsuites \(counts) time=\"\(time(seconds))\">\n"
        out += "  <testsuite name=\"lifeline\" \(counts) errors=\"0\" skipped=\"0\" time=\"\(time(seconds))\">\n"
        for c in cases {
            out +=
                "    <testcase classname=\"\(escape(c.classname))\" name=\"\(escape(c.name))\" "
                + "time=\"\(time(c.seconds))\""
            guard let headline = c.failure.first else {
                out += "/>\n"
                continue
            }
            out += ">\n"
            out +=
                "      <failure message=\"\(escape(headline))\" type=\"failure\">"
                + escape(c.failure.joined(separator: "\n"), inAttribute: false) + "</failure>\n"
            if !c.stderr.isEmpty {
                var text = Substring(c.stderr)
                if text.utf8.count > stderrLimit {
                    text = "…\n" + String(decoding: text.utf8.suffix(stderrLimit), as: UTF8.self)
                }
                out += "      <system-err>" + escape(String(text), inAttribute: false) + "</system-err>\n"
            }
            out += "    </testcase>\n"
        }
        out += "  </testsuite>\n</testsuites>\n"
        return out
    }

    /// Seconds with three decimals, as JUnit readers expect (no exponent, `.` as the point).
    static func time(_ seconds: Double) -> String {
        let ms = Int64(saturating: max(seconds, 0) * 1000)
        let frac = String(ms % 1000)
        return "\(ms / 1000)." + String(repeating: "0", count: 3 - frac.count) + frac
    }

    /// Text for an attribute (`inAttribute`) or an element. In an attribute, line breaks and tabs
    /// become character references, which keeps them (a reader turns a raw one into a space);
    /// characters XML 1.0 forbids (the other controls) become U+FFFD.
    static func escape(_ text: String, inAttribute: Bool = true) -> String {
        text.replacingScalars { scalar in
            switch scalar {
            case "&": "&amp;"
            case "<": "&lt;"
            case ">": "&gt;"
            case "\"": "&quot;"
            case "'": "&apos;"
            case "\n" where inAttribute: "&#10;"
            case "\r": "&#13;"
            case "\t" where inAttribute: "&#9;"
            case "\n", "\t": nil
            case _ where scalar.value < 0x20 || scalar.value == 0xFFFE || scalar.value == 0xFFFF: "\u{FFFD}"
            default: nil
            }
        }
    }
}
