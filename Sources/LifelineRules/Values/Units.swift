/// The units the host reads and writes: durations (`1h30m`), byte counts (`64MiB`) and the
/// clock's resolution. They sit at the bottom: scenarios, profiles, plugin.toml, timers and
/// tasks all read them here, and they name nothing above them.
public enum Units {
    // MARK: - Time

    /// The soonest a timer fires: 1 ms, the clock's resolution. A loop of zero-delay timers still
    /// moves virtual time on, so `--until` can end it.
    public static let clockResolution = 0.001

    /// A delay as the clock takes it: never below its resolution, and NaN as none.
    public static func clockDelay(_ seconds: Double) -> Double { max(clockResolution, seconds.isNaN ? 0 : seconds) }

    /// The latest time a scenario can name: 100 years, well inside what `HostTime` holds.
    public static let maximumSeconds: Double = 100 * 365 * 24 * 3600

    /// The units of a duration, largest first, with their length in seconds.
    private static let durationUnits: [(name: Substring, seconds: Double)] = [
        ("h", 3600), ("m", 60), ("s", 1), ("ms", 0.001),
    ]

    /// Parses a time or a duration (a time is the duration since the start): one or more
    /// NUMBER UNIT parts, largest unit first and each unit at most once, added up: `250ms`,
    /// `1.5s`, `2m`, `1h`, `5m10s`, `1h30m`, `1m30.5s`, `2s500ms`. The units are `h`, `m`, `s`
    /// and `ms`; a number is decimal digits with at most one `.` (no sign, no exponent).
    ///
    /// Scenario step times, `in DURATION` delays, profile figures and `--until` all read times
    /// here, so they take the same forms.
    ///
    /// - Parameter at: what starts each message: `file:line`, or the option's name.
    /// - Throws: `LifelineError.badInput` naming the problem: a number without a unit (`5m10`), an
    ///   unknown unit, units out of order (`10s5m`) or repeated (`5s5s`), a sign, or a time past
    ///   100 years.
    public static func parseDuration(_ text: String, at: String) throws(LifelineError) -> HostTime {
        let forms = "write a number and a unit, or several from the largest down: 250ms, 1.5s, 2m, 1h, 5m10s"
        if text.hasPrefix("-") {
            throw .badInput("\(at): '\(text)' is negative; times count from the start, as in 0s or 5m10s")
        }
        guard let first = text.first, isDigit(first) || first == "." else {
            throw .badInput("\(at): '\(text)' is not a time; \(forms)")
        }
        var rest = Substring(text)
        var seconds = 0.0
        var previous: Int?  // the index in `durationUnits` of the unit before, which must be larger
        while !rest.isEmpty {
            let number = rest.prefix { isDigit($0) || $0 == "." }
            rest = rest[number.endIndex...]
            let unit = rest.prefix { $0.isASCII && $0.isLetter }
            rest = rest[unit.endIndex...]
            guard !number.isEmpty else {
                throw .badInput("\(at): unexpected '\(rest.first ?? " ")' in '\(text)'; \(forms)")
            }
            guard number.contains(where: isDigit), number.filter({ $0 == "." }).count <= 1, let value = Double(number)
            else {
                throw .badInput("\(at): '\(number)' in '\(text)' is not a number; \(forms)")
            }
            guard !unit.isEmpty else {
                if let next = rest.first {
                    throw .badInput("\(at): unexpected '\(next)' in '\(text)'; \(forms)")
                }
                if previous == nil {
                    throw .badInput("\(at): '\(text)' has no unit; \(forms)")
                }
                throw .badInput(
                    "\(at): '\(text)' ends with a number without a unit; put one after every number, as in 5m10s")
            }
            guard let index = durationUnits.firstIndex(where: { $0.name == unit }) else {
                throw .badInput("\(at): unknown unit '\(unit)' in '\(text)'; use ms, s, m or h")
            }
            if let previous, index <= previous {
                if index == previous {
                    throw .badInput(
                        "\(at): '\(text)' names the unit '\(unit)' twice; write each unit once, as in 5m10s")
                }
                throw .badInput(
                    "\(at): the units of '\(text)' are out of order; write the largest first, as in 5m10s or 2s500ms")
            }
            previous = index
            seconds += value * durationUnits[index].seconds
        }
        guard seconds.isFinite, seconds <= maximumSeconds else {
            throw .badInput("\(at): '\(text)' is too far: times go up to 100 years")
        }
        return HostTime.seconds(seconds)
    }

    private static func isDigit(_ c: Character) -> Bool { c.isASCII && c.isNumber }

    // MARK: - Bytes

    /// Why a text is not a byte count.
    public enum ByteCountError: Error { case notASize, tooLarge }

    /// The units of a byte count: binary ones because that is how memory is sized; decimal ones
    /// because people write them anyway.
    public static let byteUnits: [String: Int] = [
        "": 1, "B": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30,
        "KB": 1_000, "MB": 1_000_000, "GB": 1_000_000_000,
    ]

    /// A whole number with an optional unit from `byteUnits` ("64MiB", "50MB", "512"), blanks
    /// allowed around both: plugin.toml's limits and the scenario's `size=`/`rate=` read sizes
    /// alike. Each caller words its own message from the error.
    public static func parseByteCount(_ text: some StringProtocol) throws(ByteCountError) -> Int {
        let trimmed = trimmedBlanks(text)
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        let unit = trimmedBlanks(trimmed.dropFirst(digits.count))
        guard !digits.isEmpty, let multiplier = byteUnits[unit] else { throw .notASize }
        guard let count = Int(digits), case let (bytes, false) = count.multipliedReportingOverflow(by: multiplier)
        else { throw .tooLarge }
        return bytes
    }

    /// "512 MiB" rather than "536870912 bytes" whenever the number is whole in a unit, binary ones first.
    public static func formatBytes(_ bytes: Int) -> String {
        let units = [("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("GB", 1_000_000_000), ("MB", 1_000_000),
                     ("KB", 1_000)]
        for (unit, size) in units where bytes % size == 0 {
            return "\(bytes / size) \(unit)"
        }
        return "\(bytes) bytes"
    }

    /// `text` without the spaces and tabs around it.
    private static func trimmedBlanks(_ text: some StringProtocol) -> String {
        let isSpace = { (c: Character) in c == " " || c == "\t" }
        return String(text.drop(while: isSpace).reversed().drop(while: isSpace).reversed())
    }
}
