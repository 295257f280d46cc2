/// Conversions of a floating value to an integer that never trap.
///
/// `Int64(x)` traps when `x` is NaN, infinite or out of range, so a number a user or a plugin
/// chose (`--budget 1e16`, `lifeline.after(1e300, f)`) could end the host where it is shown or
/// added. Every such number is range-checked where it enters (docs/guarantees.md, "Numbers");
/// these are the second line, for the places that show or add an already accepted value.
extension Int64 {
    /// `value` rounded to the nearest integer, saturating at the ends; NaN gives 0.
    @inlinable
    public init(saturating value: Double) {
        let rounded = value.rounded()
        if rounded.isNaN {
            self = 0
        } else if rounded >= 9_223_372_036_854_775_807.0 {  // 2^63, the first Double past the range
            self = .max
        } else if rounded <= -9_223_372_036_854_775_808.0 {
            self = .min
        } else {
            self = Int64(rounded)
        }
    }
}

extension Int {
    /// `value` rounded to the nearest integer, saturating at the ends; NaN gives 0.
    @inlinable
    public init(saturating value: Double) { self = Int(Int64(saturating: value)) }
}
