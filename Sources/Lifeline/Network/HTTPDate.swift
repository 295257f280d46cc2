import Foundation

/// HTTP's date formats (RFC 9110 5.6.7), read into seconds since 1970. A recipient must accept
/// all three: IMF-fixdate, which senders use, and the obsolete RFC 850 and asctime forms.
///
///     Sun, 06 Nov 1994 08:49:37 GMT     IMF-fixdate
///     Sunday, 06-Nov-94 08:49:37 GMT    RFC 850 (a two-digit year: within 50 years of 1970-based
///                                       reading, as RFC 9110 asks; here 70-99 → 19xx, else 20xx)
///     Sun Nov  6 08:49:37 1994          asctime
public enum HTTPDate {
    private static let months = ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]

    /// Seconds since 1970 (UTC), or nil when `text` is none of the three forms or no real date.
    public static func seconds(_ text: String) -> Double? {
        let words = text.split(separator: " ", omittingEmptySubsequences: true).map { String($0) }
        var day: Int?, month: Int?, year: Int?, time: (Int, Int, Int)?
        if words.count == 6, words[0].hasSuffix(","), words[5] == "GMT" {
            // IMF-fixdate: day-name, DD Mon YYYY HH:MM:SS GMT
            (day, month, year, time) = (number(words[1], digits: 2), monthIndex(words[2]), number(words[3], digits: 4), clock(words[4]))
        } else if words.count == 4, words[0].hasSuffix(","), words[3] == "GMT" {
            // RFC 850: day-name, DD-Mon-YY HH:MM:SS GMT
            let parts = words[1].split(separator: "-", omittingEmptySubsequences: false).map { String($0) }
            guard parts.count == 3, let yy = number(parts[2], digits: 2) else { return nil }
            (day, month, year, time) = (number(parts[0], digits: 2), monthIndex(parts[1]), yy < 70 ? 2000 + yy : 1900 + yy, clock(words[2]))
        } else if words.count == 5, !words[0].hasSuffix(",") {
            // asctime: day-name Mon D HH:MM:SS YYYY (the day may be one digit, padded with a space)
            (day, month, year, time) = (Int(words[2]).flatMap { (1...31).contains($0) ? $0 : nil }, monthIndex(words[1]), number(words[4], digits: 4), clock(words[3]))
        } else {
            return nil
        }
        guard let day, let month, let year, let time, day >= 1, day <= daysIn(month: month, year: year) else { return nil }
        let days = daysSince1970(year: year, month: month, day: day)
        return Double(days * 86_400 + time.0 * 3600 + time.1 * 60 + time.2)
    }

    private static func number(_ text: String, digits: Int) -> Int? {
        guard text.utf8.count == digits, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        return Int(text)
    }

    private static func monthIndex(_ text: String) -> Int? {
        months.firstIndex(of: text.lowercased()).map { $0 + 1 }
    }

    private static func clock(_ text: String) -> (Int, Int, Int)? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false).map { String($0) }
        guard parts.count == 3, let h = number(parts[0], digits: 2), let m = number(parts[1], digits: 2),
            let s = number(parts[2], digits: 2), h < 24, m < 60, s <= 60
        else { return nil }
        return (h, m, s)
    }

    private static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days from 1970-01-01 to the date, in the proleptic Gregorian calendar (Howard Hinnant's
    /// days_from_civil).
    private static func daysSince1970(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400
        let doy = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
        return era * 146_097 + doe - 719_468
    }
}

/// A response's Retry-After (RFC 9110 10.2.3): delay-seconds, or an HTTP-date.
public enum RetryAfter {
    /// The seconds to wait, given the wall-clock time now (seconds since 1970); a date already
    /// past means at once (0). Nil when the value is neither form.
    public static func seconds(_ value: String, now: Double) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        // delay-seconds is 1*DIGIT: `Double` alone would also take `nan`, `-5` and `1e300`.
        if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) { return Double(text) }
        return HTTPDate.seconds(text).map { max(0, $0 - now) }
    }
}
