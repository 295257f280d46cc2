import Testing

@testable import Lifeline
@testable import LifelineRules

// The timeline is kept as a log of bytes, each event against the one before it. Whatever goes
// in must come out the same, as a value and as the report's text, read from the start or from any
// segment on.

/// `count` events of every kind the log holds: names that repeat, change, are empty, need
/// escaping, or are long; times and ids that go back, jump or stay; plugins and queues that come
/// in runs and not.
private func randomEvents(count: Int, seed: UInt64) -> [TimelineEvent] {
    // Seeded, so a failure can be run again.
    var random = SplitMix64(seed: seed)
    let plugins = ["p", "sync", "a-plugin-with-a-longer-name", "ünïcode ✓", ""]
    let queues = ["main", "q\u{1}", "uploads"]
    let names: [String?] = [
        nil, "x", "x", "", "upload", "name \n\t\"x\"\\", String(repeating: "long ", count: 40), "éö😀", "12345678",
        "123456789abcdefg",
    ]
    let taskEvents = ["taskBegan", "taskEnded", "taskExpiring", "endUnknownTask"]
    var time: Int64 = 0
    var id = 0
    var events: [TimelineEvent] = []
    for _ in 0..<count {
        switch random.next() % 8 {
        case 0: time += 0
        case 1: time -= Int64(random.next() % 1_000_000_000)
        case 2: time = Int64(bitPattern: random.next()) / 4
        default: time += Int64(random.next() % 5_000_000)
        }
        switch random.next() % 6 {
        case 0: id = Int(Int32(truncatingIfNeeded: random.next()))
        case 1: id = .max - Int(random.next() % 3)
        default: id &+= 1
        }
        let t = HostTime(nanoseconds: time)
        let plugin = plugins[Int(random.next() % UInt64(plugins.count))]
        let name = names[Int(random.next() % UInt64(names.count))]
        switch random.next() % 5 {
        case 0, 1:
            let expired: Bool? = [nil, true, false][Int(random.next() % 3)]
            events.append(
                .task(
                    time: t, event: taskEvents[Int(random.next() % 4)], plugin: plugin, task: id, name: name,
                    expired: expired))
        case 2, 3:
            let bits = random.next()
            let ending = TimelineEvent.OperationEnding(
                timedOut: bits & 1 != 0, cancelled: bits & 2 != 0, expired: bits & 4 != 0, failed: bits & 8 != 0)
            events.append(
                .operation(
                    time: t, event: bits & 16 != 0 ? "opStarted" : "opFinished", plugin: plugin,
                    queue: queues[Int(random.next() % 3)], op: id, name: name, finished: bits & 32 != 0 ? ending : nil))
        default:
            events.append(
                TimelineEvent(
                    time: t, event: "log", fields: [("plugin", .string(plugin)), ("message", .string(name ?? "-"))]))
        }
    }
    return events
}

@Test(arguments: [0, 1, 2, 3, 100, TimelineStore.segment - 1, TimelineStore.segment, 2 * TimelineStore.segment + 5])
func timelineStore_givesBackEveryEventAsItWasRecorded(count: Int) {
    let events = randomEvents(count: count, seed: UInt64(count) + 1)
    let store = TimelineStore()
    for e in events { store.append(e) }
    #expect(store.count == count)
    let back = store.events
    #expect(back.count == count)
    for (i, (a, b)) in zip(events, back).enumerated() where a.json != b.json || a.event != b.event {
        Issue.record("event \(i): \(a.json.serialized()) came back as \(b.json.serialized())")
        break
    }
}

@Test func timelineStore_writesTheSameTextAsTheValues_fromEverySegment() {
    let segment = TimelineStore.segment
    let events = randomEvents(count: 3 * segment + 17, seed: 42)
    let store = TimelineStore()
    for e in events { store.append(e) }
    let entries = store.entries
    for start in stride(from: 0, to: events.count, by: segment) {
        let range = start..<min(events.count, start + segment)
        var got = JSONText()
        entries.format(range, into: &got)
        var expected = JSONText()
        events.withUnsafeBufferPointer { $0.format(range, into: &expected) }
        #expect(got.text == expected.text, "segment from \(start)")
    }
}

@Test func timelineStore_recordsTasksAndOperationsThroughTheirOwnCalls_asTheirValues() {
    // The host's calls (`appendTask`, `appendOperation`) and the values they stand for agree.
    let store = TimelineStore()
    store.appendTask(.taskBegan, time: HostTime(nanoseconds: 5), plugin: "p", task: 1, name: "x", expired: nil)
    store.appendTask(.taskEnded, time: HostTime(nanoseconds: 5), plugin: "p", task: 1, name: "x", expired: true)
    store.appendTask(.endUnknownTask, time: HostTime(nanoseconds: 9), plugin: "q", task: 7, name: nil, expired: nil)
    let ending = TimelineEvent.OperationEnding(timedOut: false, cancelled: true, expired: false, failed: true)
    store.appendOperation(.opStarted, time: .zero, plugin: "p", queue: "main", op: 3, name: nil, finished: nil)
    store.appendOperation(.opFinished, time: .zero, plugin: "p", queue: "main", op: 3, name: "n", finished: ending)
    let expected: [TimelineEvent] = [
        .task(time: HostTime(nanoseconds: 5), event: "taskBegan", plugin: "p", task: 1, name: "x"),
        .task(time: HostTime(nanoseconds: 5), event: "taskEnded", plugin: "p", task: 1, name: "x", expired: true),
        .task(time: HostTime(nanoseconds: 9), event: "endUnknownTask", plugin: "q", task: 7),
        .operation(time: .zero, event: "opStarted", plugin: "p", queue: "main", op: 3, name: nil),
        .operation(time: .zero, event: "opFinished", plugin: "p", queue: "main", op: 3, name: "n", finished: ending),
    ]
    #expect(store.events.map { $0.json.serialized() } == expected.map { $0.json.serialized() })
}

@Test func timelineStore_keepsATaskEventInAFewBytes() {
    // The point of the log: a plugin's tasks cost it bytes, not a value and strings each.
    let store = TimelineStore()
    for i in 1...10_000 {
        store.appendTask(.taskBegan, time: .zero, plugin: "bench", task: i, name: "x", expired: nil)
        store.appendTask(.taskEnded, time: .zero, plugin: "bench", task: i, name: "x", expired: nil)
    }
    #expect(store.byteCount <= 20_000 * 8)
}

@Test func timelineStore_manyPluginsInterleaved_keepEachEventsPluginAndQueue() {
    // Thousands of plugins' events interleaved, as a thousand plugins' timers fire: each event
    // comes back with its own plugin and queue, names that share bytes or differ by one included.
    let plugins = (0..<3_000).map { "p\($0)" } + ["", "p", "p0 ", "é", "p\u{0}0"]
    let store = TimelineStore()
    var expected: [(String, String)] = []
    for round in 0..<2 {
        for (i, plugin) in plugins.enumerated().reversed() {
            let queue = "q\((i + round) % 7)"
            store.appendOperation(.opStarted, time: .zero, plugin: plugin, queue: queue, op: i, name: nil, finished: nil)
            store.appendTask(.taskBegan, time: .zero, plugin: plugin, task: i, name: nil, expired: nil)
            expected.append((plugin, queue))
            expected.append((plugin, ""))
        }
    }
    let back = store.events.map { ($0["plugin"]?.stringValue ?? "?", $0["queue"]?.stringValue ?? "") }
    #expect(back.count == expected.count)
    #expect(back.elementsEqual(expected, by: { $0 == $1 }))
}

@Test func nameNumbers_giveEachNameOneNumber_inTheOrderFirstSeen() {
    var table = NameNumbers()
    var names: [String] = []
    for i in 0..<1_000 { #expect(table.number(of: "n\(i)", in: &names) == i) }
    for i in (0..<1_000).reversed() { #expect(table.number(of: "n" + String(i), in: &names) == i) }
    #expect(names.count == 1_000)
    #expect(names[999] == "n999")
}
