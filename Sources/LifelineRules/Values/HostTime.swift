/// A point on the host's clock: nanoseconds since the host started.
///
/// The same type serves the virtual clock of `lifeline simulate` and the monotonic clock of
/// `lifeline run`, so every rule reads time the same way in both.
///
/// Its arithmetic is inlinable: the executor compares times on every job, across the boundary
/// of this module.
public struct HostTime: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the host started.
    public var nanoseconds: Int64

    @inlinable public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// The host's start.
    public static let zero = HostTime(nanoseconds: 0)

    /// The latest time the host can represent (about 292 years).
    public static let distantFuture = HostTime(nanoseconds: .max)

    /// A time `seconds` after the start, rounded to the nanosecond; saturates at the ends.
    @inlinable public static func seconds(_ seconds: Double) -> HostTime {
        if seconds.isNaN { return distantFuture }
        return HostTime(nanoseconds: Int64(saturating: seconds * 1e9))
    }

    /// Seconds since the start.
    @inlinable public var seconds: Double { Double(nanoseconds) / 1e9 }

    /// Whole milliseconds since the start, rounded half away from zero, as the report shows them.
    @inlinable public var milliseconds: Int64 { (nanoseconds + (nanoseconds >= 0 ? 500_000 : -500_000)) / 1_000_000 }

    @inlinable public static func < (a: HostTime, b: HostTime) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `self` moved on by `seconds`; a huge or infinite span saturates instead of overflowing,
    /// and NaN (no time at all) gives the distant future, as "never" does.
    @inlinable public func adding(seconds: Double) -> HostTime {
        if seconds.isNaN { return .distantFuture }
        let (sum, overflow) = nanoseconds.addingReportingOverflow(Int64(saturating: seconds * 1e9))
        if overflow { return HostTime(nanoseconds: seconds > 0 ? .max : .min) }
        return HostTime(nanoseconds: sum)
    }

    public var description: String { ReportNumber.seconds(self) }
}
