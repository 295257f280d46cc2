/// One of `count` disjoint slices of a numbered list of work (`--shard INDEX/COUNT`), so a CI
/// matrix can spread the work over machines. Item `i` (0-based) belongs to shard
/// `i % count + 1`: every item is in exactly one shard, the shards' sizes differ by at most one,
/// and an item's shard does not depend on how many items there are.
///
/// `lifeline test` numbers its scenarios in the order it lists them (plugin, then file);
/// `lifeline explore` numbers each plugin's runs from 0.
public struct Shard: Equatable, Sendable, CustomStringConvertible {
    /// 1-based: the first shard is `1/COUNT`.
    public var index: Int
    public var count: Int

    /// Every item: the shard `1/1`.
    public static let all = Shard(index: 1, count: 1)

    public init(index: Int, count: Int) {
        precondition(count >= 1 && (1...count).contains(index), "a shard is INDEX/COUNT with 1 <= INDEX <= COUNT")
        self.index = index
        self.count = count
    }

    /// Reads `INDEX/COUNT`, as in `2/4`. Throws the message for anything else.
    public static func parse(_ text: String) throws(LifelineError) -> Shard {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        let form = "--shard takes INDEX/COUNT with 1 <= INDEX <= COUNT, as in 2/4"
        guard parts.count == 2, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && $0.isNumber } }),
            let index = Int(parts[0]), let count = Int(parts[1])
        else { throw .usage("'\(text)' is not a shard; \(form)") }
        guard count >= 1, index >= 1, index <= count else {
            throw .usage("'\(text)' is not a shard; \(form)")
        }
        return Shard(index: index, count: count)
    }

    /// Whether the 0-based item `item` is in this shard.
    public func contains(_ item: Int) -> Bool { item % count == index - 1 }

    public var description: String { "\(index)/\(count)" }
}
