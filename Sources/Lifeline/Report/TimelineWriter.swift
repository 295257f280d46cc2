import Foundation

/// Writes a report's timeline entries. A long timeline is cut into segments that two threads
/// format while the caller writes the finished ones, in order: formatting costs more than the
/// write, and a machine has more than one core. The bytes are the same as writing the entries
/// one after the other, and at most `slots` segments are held at once, so the report is never
/// held whole.
///
/// Threading: the caller's thread calls `sink`; it and the helpers read `events`, which the caller
/// keeps unchanged (it holds the recorder's lock) until this returns, after the helpers are done.
enum TimelineWriter {
    /// Events a segment holds: about 1.5 MB of text.
    static let segment = 16_384
    static let slots = 4
    static let helpers = 2

    /// Writes `events` as the timeline's entries (each but the first of all after a comma, each on
    /// its own line) through `text`, handing `sink` what is written a megabyte or more at a time.
    /// `text` holds what is not yet handed on, before and after.
    static func write<Entries: TimelineEntries>(
        _ events: Entries, through text: inout JSONText, helpers: Int = helpers,
        _ sink: (UnsafeRawBufferPointer) throws(LifelineError) -> Void
    ) throws(LifelineError) {
        guard events.count > 2 * segment else {
            for start in stride(from: 0, to: events.count, by: segment) {
                events.format(start..<min(events.count, start + segment), into: &text)
                if text.count >= 1 << 20 {
                    try text.withBytes(sink)
                    text.removeAll()
                }
            }
            return
        }
        try text.withBytes(sink)
        text.removeAll()
        // The pipeline is not generic: its threads start from a C function, which cannot name a
        // generic type. It formats through this closure, a segment per call.
        try Pipeline(count: events.count) { range, text in events.format(range, into: &text) }
            .run(helpers: helpers, sink)
    }

    /// A segment's text, and which segment it holds once formatted (-1: none yet).
    private final class Slot {
        var text = JSONText(capacity: 2 << 20)
        var formatted = -1
    }

    private final class Pipeline: @unchecked Sendable {
        let count: Int
        let formatRange: (Range<Int>, inout JSONText) -> Void
        let segments: Int
        let condition = MonotonicCondition()
        let slots = (0..<TimelineWriter.slots).map { _ in Slot() }
        // Under `condition`'s lock:
        var next = 0  // the next segment a helper takes
        var written = 0  // segments handed to the sink; a slot is free once its last one is
        var running = 0  // helpers not yet finished
        var stopped = false  // the sink failed: helpers stop

        init(count: Int, format: @escaping (Range<Int>, inout JSONText) -> Void) {
            self.count = count
            formatRange = format
            segments = (count + TimelineWriter.segment - 1) / TimelineWriter.segment
        }

        func run(helpers: Int, _ sink: (UnsafeRawBufferPointer) throws(LifelineError) -> Void) throws(LifelineError) {
            running = start(helpers: helpers)
            defer {
                condition.withLock {
                    while running > 0 { condition.wait(until: nil) }
                }
            }
            for k in 0..<segments {
                let slot = slots[k % slots.count]
                condition.lock()
                if next == k {
                    // No helper has taken it (they lag, or none could start): format it here. Its
                    // slot is free, since every segment before it is written.
                    next += 1
                    condition.unlock()
                    format(k, into: slot)
                    condition.lock()
                    slot.formatted = k
                }
                while slot.formatted != k { condition.wait(until: nil) }
                condition.unlock()
                do {
                    try slot.text.withBytes(sink)
                } catch {
                    condition.withLock {
                        stopped = true
                        condition.broadcast()
                    }
                    throw error
                }
                condition.withLock {
                    written = k + 1
                    condition.broadcast()
                }
            }
        }

        /// Starts up to `count` helper threads; how many started. A thread that cannot be made
        /// (the process is at its limit) is no failure: the caller formats what no helper takes.
        private func start(helpers count: Int) -> Int {
            var started = 0
            for _ in 0..<count {
                let context = Unmanaged.passRetained(self).toOpaque()
                var thread = pthread_t()
                let made = pthread_create(&thread, nil, { context in
                    let pipeline = Unmanaged<Pipeline>.fromOpaque(context!).takeRetainedValue()
                    pipeline.help()
                    return nil
                }, context)
                if made == 0 {
                    pthread_detach(thread)
                    started += 1
                } else {
                    Unmanaged<Pipeline>.fromOpaque(context).release()
                }
            }
            return started
        }

        private func format(_ k: Int, into slot: Slot) {
            slot.text.removeAll()
            let start = k * TimelineWriter.segment
            formatRange(start..<min(count, start + TimelineWriter.segment), &slot.text)
        }

        /// A helper's loop: take the next segment, wait for its slot to be free, format it.
        fileprivate func help() {
            condition.lock()
            defer {
                running -= 1
                condition.broadcast()
                condition.unlock()
            }
            while !stopped && next < segments {
                let k = next
                next += 1
                while !stopped && k - slots.count >= written { condition.wait(until: nil) }
                if stopped { return }
                let slot = slots[k % slots.count]
                condition.unlock()
                format(k, into: slot)
                condition.lock()
                slot.formatted = k
                condition.broadcast()
            }
        }
    }
}

/// A timeline the writer can read a segment at a time, from several threads while it does not
/// change.
protocol TimelineEntries {
    var count: Int { get }
    /// Appends `range`'s entries, which starts at a multiple of `TimelineWriter.segment`: each on
    /// its own line, and after a comma but the very first.
    func format(_ range: Range<Int>, into text: inout JSONText)
}

extension TimelineStore.Entries: TimelineEntries {}

extension UnsafeBufferPointer: TimelineEntries where Element == TimelineEvent {
    func format(_ range: Range<Int>, into text: inout JSONText) {
        for i in range {
            TimelineWriter.startEntry(i, in: &text)
            self[i].write(into: &text)
        }
    }
}

extension TimelineWriter {
    /// What comes before entry `i`: a comma but before the very first, and its own line.
    @inline(__always) static func startEntry(_ i: Int, in text: inout JSONText) {
        if i > 0 { text.raw(",") }
        text.newline(indent: 2)
    }
}
