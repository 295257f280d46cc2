/// A point on the host's clock: nanoseconds since the host started.
///
/// The same type serves the virtual clock of `lifeline simulate` and the monotonic clock of
/// `lifeline run`, so every rule reads time the same way in both.
public struct HostTime: Comparable, Hashable, Sendable, CustomStringConvertible {
    /// Nanoseconds since the host started.
    public var nanoseconds: Int64

    public init(nanoseconds: Int64) { self.nanoseconds = nanoseconds }

    /// The host's start.
    public static let zero = HostTime(nanoseconds: 0)

    /// The latest time the host can represent (about 292 years).
    public static let distantFuture = HostTime(nanoseconds: .max)

    /// A time `seconds` after the start, rounded to the nanosecond; saturates at the ends.
    public static func seconds(_ seconds: Double) -> HostTime {
        let ns = (seconds * 1e9).rounded()
        if !(ns < 9.2e18) { return distantFuture }  // also NaN
        if ns <= -9.2e18 { return HostTime(nanoseconds: .min) }
        return HostTime(nanoseconds: Int64(ns))
    }

    /// Seconds since the start.
    public var seconds: Double { Double(nanoseconds) / 1e9 }

    /// Whole milliseconds since the start, rounded half away from zero, as the report shows them.
    public var milliseconds: Int64 { (nanoseconds + (nanoseconds >= 0 ? 500_000 : -500_000)) / 1_000_000 }

    public static func < (a: HostTime, b: HostTime) -> Bool { a.nanoseconds < b.nanoseconds }

    /// `self` moved on by `seconds`; a huge or infinite span saturates instead of overflowing.
    public func adding(seconds: Double) -> HostTime {
        let delta = seconds * 1e9
        if delta >= Double(Int64.max - nanoseconds) { return HostTime(nanoseconds: .max) }
        return HostTime(nanoseconds: nanoseconds + Int64(delta.rounded()))
    }

    public var description: String { ReportNumber.seconds(self) }
}
