#if canImport(Glibc)
import Glibc
#endif

/// The timeline as the recorder keeps it: a log of bytes, decoded only when the timeline is read
/// or the report written.
///
/// A plugin can make hundreds of thousands of task and operation events, and keeping them costs
/// more in memory than in instructions: each new page the timeline grows into is a fault for the
/// kernel to zero. So each task or operation event is a few bytes: its kind and flags, the time
/// and id as differences from the event before (0 and 1 byte in virtual time), the plugin and
/// queue as numbers into a table of their names, and the task's name inline, or a mark that it is
/// the same as the last one. `taskBegan` then `taskEnded` of a task named "x" take 7 bytes each,
/// where a value took 88 and its strings. Other events, which the host makes a few of per
/// lifecycle step, are kept whole beside the log, which holds their index.
///
/// Decoding needs the event before; every `TimelineWriter.segment` events a checkpoint keeps what
/// the decoder knows there, so the report's writer can start its threads at any segment.
///
/// Threading: none of its own; the recorder holds its lock around every use.
final class TimelineStore {
    enum Kind: UInt8, CaseIterable {
        /// An event kept whole in `general`.
        case general
        case taskBegan, taskEnded, taskExpiring, endUnknownTask
        case opStarted, opFinished

        var isOperation: Bool { self == .opStarted || self == .opFinished }

        /// The event's name in the report; "" for `general`, whose value carries its own. Each
        /// name folds to its literal, so the report's writer reads it for free.
        var name: String {
            switch self {
            case .general: return ""
            case .taskBegan: return ReportEventName.taskBegan.rawValue
            case .taskEnded: return ReportEventName.taskEnded.rawValue
            case .taskExpiring: return ReportEventName.taskExpiring.rawValue
            case .endUnknownTask: return ReportEventName.endUnknownTask.rawValue
            case .opStarted: return ReportEventName.opStarted.rawValue
            case .opFinished: return ReportEventName.opFinished.rawValue
            }
        }

        /// The kind named `name`, if the log keeps such events in its own form.
        init?(name: String) {
            guard !name.isEmpty, let kind = Kind.allCases.first(where: { $0.name == name }) else { return nil }
            self = kind
        }
    }

    /// The flags byte after the kind. Both kinds of event: a name is given, and it is the same as
    /// the last name written. Tasks: `expired` is given, and its value. `opFinished`: how it ended.
    private enum Flag {
        static let name: UInt8 = 1, sameName: UInt8 = 2
        static let expiredGiven: UInt8 = 4, expired: UInt8 = 8
        static let finished: UInt8 = 4, timedOut: UInt8 = 8, cancelled: UInt8 = 16, stopExpired: UInt8 = 32
        static let failed: UInt8 = 64
    }

    /// What the decoder carries from one event to the next.
    struct Position {
        var offset = 0
        var time: Int64 = 0
        var number: Int64 = 0
        /// Where the last name written inline is in the log.
        var nameOffset = 0
        var nameCount = 0
    }

    @exclusivity(unchecked) private var bytes: UnsafeMutablePointer<UInt8>
    @exclusivity(unchecked) private var capacity: Int
    /// What the next event is encoded against; its `offset` is the log's length.
    @exclusivity(unchecked) private var position = Position()
    @exclusivity(unchecked) private(set) var count = 0
    /// The position before every `segment`-th event.
    @exclusivity(unchecked) private var checkpoints: [Position] = []
    @exclusivity(unchecked) private var general: [TimelineEvent] = []
    /// The plugins' and queues' names, by number, and their numbers.
    @exclusivity(unchecked) private var names: [String] = []
    @exclusivity(unchecked) private var numbers = NameNumbers()
    /// A plugin's events mostly come in runs: the last plugin's and queue's numbers, and the last
    /// task or operation name, are found with one comparison of strings that are mostly the same.
    @exclusivity(unchecked) private var lastPlugin = LastNumber(), lastQueue = LastNumber()
    @exclusivity(unchecked) private var lastName = ""

    private struct LastNumber {
        var name = ""
        var number = -1
    }

    static let segment = TimelineWriter.segment

    /// The log's length in bytes.
    var byteCount: Int { position.offset }

    init() {
        capacity = 4096
        bytes = malloc(capacity)!.assumingMemoryBound(to: UInt8.self)
    }

    deinit { free(bytes) }

    // MARK: Appending

    func append(_ event: consuming TimelineEvent) {
        switch event.storage {
        case .task(let plugin, let task, let name, let expired):
            if let kind = Kind(name: event.event), !kind.isOperation {
                return appendTask(kind, time: event.time, plugin: plugin, task: task, name: name, expired: expired)
            }
        case .operation(let plugin, let queue, let op, let name, let finished):
            if let kind = Kind(name: event.event), kind.isOperation {
                return appendOperation(
                    kind, time: event.time, plugin: plugin, queue: queue, op: op, name: name, finished: finished)
            }
        case .fields:
            break
        }
        startEvent(room: 12)
        put(Kind.general.rawValue)
        putVarint(UInt64(general.count))
        general.append(event)
        position.offset = cursor
    }

    func appendTask(_ kind: Kind, time: HostTime, plugin: String, task: Int, name: String?, expired: Bool?) {
        let plugin = number(plugin, &lastPlugin)
        var flags: UInt8 = 0
        if let expired { flags |= Flag.expiredGiven | (expired ? Flag.expired : 0) }
        appendEvent(kind, flags: flags, time: time, number: task, plugin: plugin, queue: nil, name: name)
    }

    func appendOperation(
        _ kind: Kind, time: HostTime, plugin: String, queue: String, op: Int, name: String?,
        finished: TimelineEvent.OperationEnding?
    ) {
        let plugin = number(plugin, &lastPlugin), queue = number(queue, &lastQueue)
        var flags: UInt8 = 0
        if let f = finished {
            flags = Flag.finished | (f.timedOut ? Flag.timedOut : 0) | (f.cancelled ? Flag.cancelled : 0)
                | (f.expired ? Flag.stopExpired : 0) | (f.failed ? Flag.failed : 0)
        }
        appendEvent(kind, flags: flags, time: time, number: op, plugin: plugin, queue: queue, name: name)
    }

    @inline(__always) private func appendEvent(
        _ kind: Kind, flags: UInt8, time: HostTime, number: Int, plugin: Int, queue: Int?, name: String?
    ) {
        var flags = flags
        var inline: String?
        if let name {
            flags |= Flag.name
            if name == lastName && position.nameOffset > 0 { flags |= Flag.sameName } else { inline = name }
        }
        // kind, flags, two differences and two numbers of up to 10 bytes each, a name's length
        startEvent(room: 2 + 4 * 10 + 10)
        put(kind.rawValue)
        put(flags)
        putSigned(time.nanoseconds &- position.time)
        putSigned(Int64(number) &- position.number)
        putVarint(UInt64(plugin))
        if let queue { putVarint(UInt64(queue)) }
        if let inline {
            let n = inline.utf8.count
            putVarint(UInt64(n))
            reserve(n)
            position.nameOffset = cursor
            position.nameCount = n
            copy(inline, count: n)
            lastName = inline
        }
        position.time = time.nanoseconds
        position.number = Int64(number)
        position.offset = cursor
    }

    /// Keeps a checkpoint when a segment starts, and makes room for `room` bytes.
    @inline(__always) private func startEvent(room: Int) {
        if count % Self.segment == 0 { checkpoints.append(position) }
        count += 1
        cursor = position.offset
        reserve(room)
    }

    private func number(_ name: String, _ last: inout LastNumber) -> Int {
        if last.number >= 0 && name == last.name { return last.number }
        last = LastNumber(name: name, number: intern(name))
        return last.number
    }

    private func intern(_ name: String) -> Int {
        numbers.number(of: name, in: &names)
    }

    // The write position within the event being appended.
    @exclusivity(unchecked) private var cursor = 0

    @inline(__always) private func reserve(_ n: Int) {
        if capacity - cursor < n { grow(to: cursor + n) }
    }

    @inline(never) private func grow(to needed: Int) {
        capacity = max(2 * capacity, needed)
        bytes = realloc(bytes, capacity)!.assumingMemoryBound(to: UInt8.self)
    }

    @inline(__always) private func put(_ b: UInt8) {
        bytes[cursor] = b
        cursor += 1
    }

    @inline(__always) private func putVarint(_ v: UInt64) {
        var v = v
        while v >= 0x80 {
            put(UInt8(truncatingIfNeeded: v) | 0x80)
            v >>= 7
        }
        put(UInt8(v))
    }

    /// Zigzag: small differences either way take one byte.
    @inline(__always) private func putSigned(_ v: Int64) {
        putVarint(UInt64(bitPattern: (v &<< 1) ^ (v >> 63)))
    }

    /// The `n` UTF-8 bytes of `s` at the cursor, which has room for them.
    @inline(__always) private func copy(_ s: String, count n: Int) {
        let target = UnsafeMutableRawPointer(bytes + cursor)
        cursor += n
        // A native string lends its bytes (a small one from a copy on the stack); another kind is
        // made native first.
        if s.utf8.withContiguousStorageIfAvailable({ Self.copy($0, to: target) }) == nil {
            var s = s
            s.withUTF8 { Self.copy($0, to: target) }
        }
    }

    @inline(__always) private static func copy(_ source: UnsafeBufferPointer<UInt8>, to target: UnsafeMutableRawPointer) {
        guard let p = source.baseAddress else { return }
        let n = source.count
        if n >= 8 && n <= 16 {
            // Most are names: two overlapping words, not a call to memcpy.
            let s = UnsafeRawPointer(p)
            target.storeBytes(of: s.loadUnaligned(as: UInt64.self), as: UInt64.self)
            target.storeBytes(of: s.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self), toByteOffset: n - 8, as: UInt64.self)
        } else if n < 8 {
            for i in 0..<n { target.storeBytes(of: p[i], toByteOffset: i, as: UInt8.self) }
        } else {
            target.copyMemory(from: p, byteCount: n)
        }
    }

    // MARK: Reading

    /// The events as values, in the order they were recorded.
    var events: [TimelineEvent] {
        let entries = self.entries
        var events: [TimelineEvent] = []
        events.reserveCapacity(count)
        var reader = entries.reader(at: 0)
        for _ in 0..<count { events.append(reader.next()) }
        return events
    }

    /// The log as the report's writer reads it: valid until the next append.
    var entries: Entries {
        Entries(bytes: bytes, count: count, checkpoints: checkpoints, general: general, names: names)
    }

    /// A view of the log that other threads can read while it does not change.
    struct Entries: @unchecked Sendable {
        let bytes: UnsafeMutablePointer<UInt8>
        let count: Int
        let checkpoints: [Position]
        let general: [TimelineEvent]
        let names: [String]

        /// A reader at event `index`, which starts a segment.
        func reader(at index: Int) -> Reader {
            precondition(index % TimelineStore.segment == 0)
            return Reader(entries: self, position: index < count ? checkpoints[index / TimelineStore.segment] : Position())
        }

        /// Writes `range`'s events (it starts a segment) as timeline entries, each after a comma but
        /// the very first, each on its own line.
        func format(_ range: Range<Int>, into text: inout JSONText) {
            var reader = reader(at: range.lowerBound)
            for i in range {
                TimelineWriter.startEntry(i, in: &text)
                reader.write(into: &text)
            }
        }
    }

    /// Decodes events one after the other.
    struct Reader {
        let entries: Entries
        var position: Position

        /// One decoded event, its strings still bytes in the log.
        private struct Decoded {
            var kind: Kind
            var flags: UInt8
            var general = 0
            var plugin = 0
            var queue = 0
            var hasName: Bool { flags & Flag.name != 0 }
        }

        @inline(__always) private mutating func byte() -> UInt8 {
            let b = entries.bytes[position.offset]
            position.offset += 1
            return b
        }

        @inline(__always) private mutating func varint() -> UInt64 {
            var v: UInt64 = 0, shift: UInt64 = 0
            while true {
                let b = byte()
                v |= UInt64(b & 0x7f) << shift
                if b < 0x80 { return v }
                shift += 7
            }
        }

        @inline(__always) private mutating func signed() -> Int64 {
            let z = varint()
            return Int64(bitPattern: (z >> 1) ^ (0 &- (z & 1)))
        }

        @inline(__always) private mutating func decode() -> Decoded {
            let kind = Kind(rawValue: byte())!
            if kind == .general { return Decoded(kind: kind, flags: 0, general: Int(varint())) }
            var d = Decoded(kind: kind, flags: byte())
            position.time &+= signed()
            position.number &+= signed()
            d.plugin = Int(varint())
            if kind.isOperation { d.queue = Int(varint()) }
            if d.hasName && d.flags & Flag.sameName == 0 {
                let n = Int(varint())
                position.nameOffset = position.offset
                position.nameCount = n
                position.offset += n
            }
            return d
        }

        private var name: UnsafeBufferPointer<UInt8> {
            UnsafeBufferPointer(start: entries.bytes + position.nameOffset, count: position.nameCount)
        }

        private static func ending(_ flags: UInt8) -> TimelineEvent.OperationEnding? {
            guard flags & Flag.finished != 0 else { return nil }
            return .init(
                timedOut: flags & Flag.timedOut != 0, cancelled: flags & Flag.cancelled != 0,
                expired: flags & Flag.stopExpired != 0, failed: flags & Flag.failed != 0)
        }

        /// The next event as a value.
        mutating func next() -> TimelineEvent {
            let d = decode()
            let time = HostTime(nanoseconds: position.time)
            let name = d.hasName ? String(decoding: self.name, as: UTF8.self) : nil
            switch d.kind {
            case .general:
                return entries.general[d.general]
            case .taskBegan, .taskEnded, .taskExpiring, .endUnknownTask:
                return .task(
                    time: time, event: d.kind.name, plugin: entries.names[d.plugin], task: Int(position.number),
                    name: name, expired: d.flags & Flag.expiredGiven == 0 ? nil : d.flags & Flag.expired != 0)
            case .opStarted, .opFinished:
                return .operation(
                    time: time, event: d.kind.name, plugin: entries.names[d.plugin],
                    queue: entries.names[d.queue], op: Int(position.number), name: name, finished: Self.ending(d.flags))
            }
        }

        /// Writes the next event as `TimelineEvent.write` writes its value, with the same layout.
        @inline(__always) mutating func write(into out: inout JSONText) {
            let d = decode()
            if d.kind == .general { return entries.general[d.general].write(into: &out) }
            let milliseconds = HostTime(nanoseconds: position.time).milliseconds
            let name: TimelineEvent.NameText = d.hasName ? .bytes(self.name) : .none
            if d.kind.isOperation {
                TimelineEvent.writeOperation(
                    into: &out, milliseconds: milliseconds, event: d.kind.name, plugin: entries.names[d.plugin],
                    queue: entries.names[d.queue], op: position.number, name: name, result: Self.ending(d.flags)?.result)
            } else {
                TimelineEvent.writeTask(
                    into: &out, milliseconds: milliseconds, event: d.kind.name, plugin: entries.names[d.plugin],
                    task: position.number, name: name,
                    expired: d.flags & Flag.expiredGiven == 0 ? nil : d.flags & Flag.expired != 0)
            }
        }
    }
}

/// The numbers of the names in a list, found by a hash of their bytes: with many plugins, their
/// events interleave, and each task event looked its plugin's name up in a `[String: Int]`, whose
/// hashing (SipHash) and lookup cost about 450 instructions an event (simulate.long, counted). An
/// FNV-1a hash of a short name and an open-addressed table of numbers cost about 260.
struct NameNumbers {
    /// Each slot holds a number + 1 into the list of names; 0 is empty. Its count is a power of two.
    private var slots: [Int32] = []

    /// The number of `name` in `names`, which this table indexes; appended to `names` if new.
    mutating func number(of name: String, in names: inout [String]) -> Int {
        if slots.isEmpty { slots = Array(repeating: 0, count: 16) }
        let mask = slots.count - 1
        var i = Self.hash(name) & mask
        while slots[i] != 0 {
            let n = Int(slots[i]) - 1
            if names[n] == name { return n }
            i = (i + 1) & mask
        }
        names.append(name)
        slots[i] = Int32(truncatingIfNeeded: names.count)
        // Every name is in the table once, so the names are its filled slots.
        if names.count * 2 > slots.count { rehash(names) }
        return names.count - 1
    }

    private mutating func rehash(_ names: [String]) {
        slots = Array(repeating: 0, count: slots.count * 2)
        let mask = slots.count - 1
        for (n, name) in names.enumerated() {
            var i = Self.hash(name) & mask
            while slots[i] != 0 { i = (i + 1) & mask }
            slots[i] = Int32(truncatingIfNeeded: n + 1)
        }
    }

    private static func hash(_ name: String) -> Int {
        var h: UInt64 = 0xcbf2_9ce4_8422_2325
        for b in name.utf8 {
            h ^= UInt64(b)
            h &*= 0x100_0000_01b3
        }
        return Int(truncatingIfNeeded: h ^ (h >> 29))
    }
}
