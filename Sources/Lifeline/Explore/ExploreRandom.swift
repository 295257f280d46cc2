import Foundation

/// The random numbers of `lifeline explore`: SplitMix64 (Steele, Lea and Flood 2014), small,
/// fast and the same on every machine, so a seed names the same runs everywhere. Each run draws
/// from a generator of its own, seeded from the explore seed, the plugin's name and the run's
/// number: a run does not depend on which runs came before it, or on which worker ran it.
public struct ExploreRandom: RandomNumberGenerator, Sendable {
    private var state: UInt64

    public init(seed: UInt64) { state = seed }

    /// The generator of run `run` of `plugin` under `seed`.
    public init(seed: UInt64, plugin: String, run: Int) {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325  // FNV-1a: Swift's own hash differs from process to process
        for byte in plugin.utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        var mix = ExploreRandom(seed: seed ^ hash)
        state = mix.next() ^ (UInt64(truncatingIfNeeded: run) &* 0x9e37_79b9_7f4a_7c15)
        _ = next()
    }

    public mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }

    /// True with probability `p`.
    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    /// A whole number between `low` and `high`, spread evenly over their logarithms: as likely to
    /// be between 1 and 10 as between 1,000 and 10,000.
    mutating func logUniform(_ low: Int64, _ high: Int64) -> Int64 {
        let a = log(Double(max(low, 1)))
        let b = log(Double(max(high, low, 1)))
        let value = exp(Double.random(in: a...b, using: &self)).rounded()
        return min(max(Int64(value), low), high)
    }
}
