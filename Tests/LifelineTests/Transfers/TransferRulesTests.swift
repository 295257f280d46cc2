import Foundation
import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The rules of background transfers as pure values, and their ledger in SQLite.

private func withFolder<T>(_ body: (String) throws -> T) throws -> T {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("transfers-\(UUID().uuidString)").path
    try FileManager.default.createDirectory(atPath: dir + "/files/p", withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: dir) }
    return try body(dir)
}

@Test(arguments: [
    ("big.bin", "big.bin"), ("a/b/c.bin", "a/b/c.bin"), ("./a//b.bin", "a/b.bin"),
])
func transferPath_relativeNames_resolveUnderThePluginsFolder(_ name: String, _ clean: String) throws {
    try withFolder { dir in
        let path = try TransferPath.resolve(name, in: dir + "/files/p")
        #expect(path.name == clean)
        #expect(path.path == dir + "/files/p/" + clean)
    }
}

@Test(arguments: [
    ("/etc/passwd", "absolute path"), ("../q/x", "'..' is not allowed"), ("a/../../x", "'..' is not allowed"),
    ("", "must not be empty"), (".", "does not name a file"), ("a/.", "does not name a file"),
])
func transferPath_escapingNames_areRefused(_ name: String, _ expected: String) throws {
    try withFolder { dir in
        #expect {
            try TransferPath.resolve(name, in: dir + "/files/p")
        } throws: { error in
            (error as? TransferError)?.message.contains(expected) == true
        }
    }
}

@Test func transferPath_linksThatLeadOutside_areRefused() throws {
    try withFolder { dir in
        let root = dir + "/files/p"
        try FileManager.default.createDirectory(atPath: dir + "/outside", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/out", withDestinationPath: dir + "/outside")
        try FileManager.default.createSymbolicLink(atPath: root + "/file.bin", withDestinationPath: dir + "/elsewhere")
        try FileManager.default.createDirectory(atPath: root + "/inner", withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(atPath: root + "/in", withDestinationPath: root + "/inner")
        #expect(throws: TransferError.self) { try TransferPath.resolve("out/x.bin", in: root) }
        #expect(throws: TransferError.self) { try TransferPath.resolve("file.bin", in: root) }
        // A dangling link on the way could later be pointed anywhere.
        try FileManager.default.createSymbolicLink(atPath: root + "/later", withDestinationPath: dir + "/not-yet")
        #expect(throws: TransferError.self) { try TransferPath.resolve("later/x.bin", in: root) }
        // A link that stays inside is fine.
        #expect(try TransferPath.resolve("in/x.bin", in: root).name == "in/x.bin")
    }
}

@Test func retry_connectionErrorsAnd5xx_backOffExponentially_withinTheJitter() {
    let policy = RetryPolicy()
    for (attempts, base) in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0)] {
        for random in [0.0, 0.5, 0.999] {
            guard case .retry(let after) = policy.decide(.connection("refused"), attempts: attempts, random: random)
            else {
                Issue.record("attempt \(attempts) was not retried")
                continue
            }
            #expect(after >= base * 0.8 && after <= base * 1.2, "attempt \(attempts): \(after)")
        }
    }
    #expect(policy.decide(.status(503, retryAfter: nil), attempts: 1, random: 0.5) == .retry(after: 1))
}

@Test func retry_honoursRetryAfter_cappedAtTheMaximumDelay() {
    let policy = RetryPolicy()
    #expect(policy.decide(.status(503, retryAfter: 7), attempts: 1, random: 0.9) == .retry(after: 7))
    #expect(policy.decide(.status(503, retryAfter: 86_400), attempts: 1, random: 0) == .retry(after: 300))
    #expect(policy.decide(.status(429, retryAfter: 30), attempts: 1, random: 0) == .retry(after: 30))
    // Jitter never takes a delay past the cap.
    #expect(policy.decide(.connection("reset"), attempts: 4, random: 0.99) != .retry(after: 0))
    if case .retry(let after) = policy.decide(.connection("reset"), attempts: 4, random: 0.99) {
        #expect(after <= policy.maximumDelay)
    }
    var capped = RetryPolicy()
    capped.maximumAttempts = 20
    if case .retry(let after) = capped.decide(.connection("reset"), attempts: 12, random: 0.99) {
        #expect(after == capped.maximumDelay)
    }
}

@Test func retry_4xxAndBadFiles_failAtOnce_andTheLimitEndsRetries() {
    let policy = RetryPolicy()
    #expect(policy.decide(.status(404, retryAfter: nil), attempts: 1, random: 0) == .fail(reason: "the server answered 404"))
    #expect(policy.decide(.verification("sha256 mismatch"), attempts: 1, random: 0) == .fail(reason: "sha256 mismatch"))
    #expect(
        policy.decide(.status(500, retryAfter: 1), attempts: 5, random: 0)
            == .fail(reason: "gave up after 5 attempts: the server answered 500"))
}

@Test func resume_onlyAGetWithAStrongValidator_asksForARange() {
    #expect(
        ResumeRule.headers(method: "GET", received: 100, etag: "\"v1\"", lastModified: nil)
            == [.range: "bytes=100-", .ifRange: "\"v1\""])
    #expect(
        ResumeRule.headers(method: "GET", received: 100, etag: nil, lastModified: "Tue, 1 Dec 2026 10:00:00 GMT")
            == [.range: "bytes=100-", .ifRange: "Tue, 1 Dec 2026 10:00:00 GMT"])
    #expect(ResumeRule.headers(method: "GET", received: 100, etag: "W/\"weak\"", lastModified: nil).isEmpty)
    // With any ETag, a date is not used: two versions can share a second.
    #expect(
        ResumeRule.headers(method: "GET", received: 100, etag: "W/\"weak\"", lastModified: "Tue, 1 Dec 2026").isEmpty)
    #expect(ResumeRule.headers(method: "GET", received: 100, etag: nil, lastModified: nil).isEmpty)
    #expect(ResumeRule.headers(method: "POST", received: 100, etag: "\"v1\"", lastModified: nil).isEmpty)
    #expect(ResumeRule.headers(method: "GET", received: 0, etag: "\"v1\"", lastModified: nil).isEmpty)
}

@Test func resume_appendsOnlyTheBytesAskedFor_neverSplices() {
    #expect(ResumeRule.outcome(status: 206, contentRange: "bytes 100-199/200", requestedFrom: 100) == .append)
    #expect(ResumeRule.outcome(status: 200, contentRange: nil, requestedFrom: 100) == .restart)
    #expect(ResumeRule.outcome(status: 206, contentRange: "bytes 0-199/200", requestedFrom: 100) == .mismatch)
    #expect(ResumeRule.outcome(status: 206, contentRange: nil, requestedFrom: 100) == .mismatch)
}

@Test func progress_atMostFourASecond_andAlwaysTheLast() {
    var throttle = ProgressThrottle()
    let times = stride(from: 0.0, to: 1.0, by: 0.05).map { $0 }
    let admitted = times.filter { throttle.admit(1, at: $0) }
    #expect(admitted == [0, 0.25, 0.5, 0.75].map { t in times.first { $0 >= t - 1e-9 }! })
    let last = throttle.admit(1, at: 0.76, final: true)
    let other = throttle.admit(2, at: 0.76)  // another transfer has its own allowance
    #expect(last && other)
}

@Test func ledger_finalStateAndItsEvent_areWrittenTogether_andEventsStayUntilAcknowledged() throws {
    try withFolder { dir in
        let path = dir + "/state"
        var record: TransferRecord
        do {
            let ledger = TransferLedger(database: try StateDatabase.open(stateDirectory: path))
            record = try ledger.add(plugin: "p", kind: .download, method: "GET", url: "http://x/big", file: "big",
                sha256: nil)
            _ = try ledger.add(plugin: "q", kind: .upload, method: "PUT", url: "http://x/up", file: "up", sha256: nil)
            record.state = .running
            record.received = 10
            try ledger.save(record)
        }
        // A new host on the same state dir resumes both, with the progress.
        let ledger = TransferLedger(database: try StateDatabase.open(stateDirectory: path))
        let unfinished = try ledger.unfinished()
        #expect(unfinished.map(\.id) == [record.id, record.id + 1])
        #expect(unfinished[0].received == 10)
        #expect(try ledger.pluginsWithPendingEvents().isEmpty)
        record.state = .finished
        try ledger.save(record)
        // Saving a finished transfer again changes nothing and makes no second event.
        record.reason = "again"
        try ledger.save(record)
        #expect(try ledger.pendingEvents(plugin: "p").count == 1)
        var failed = unfinished[1]
        failed.state = .failed
        failed.reason = "the server answered 404"
        try ledger.save(failed)
        #expect(try ledger.unfinished().isEmpty)
        #expect(try ledger.pluginsWithPendingEvents() == ["p", "q"])
        let events = try ledger.pendingEvents(plugin: "q")
        #expect(events.map(\.name) == ["transferDidFail"])
        #expect(events.first?.reason == "the server answered 404")
        // Still there until acknowledged, as many times as it is read.
        #expect(try ledger.pendingEvents(plugin: "q").count == 1)
        try ledger.acknowledge(events[0].seq)
        #expect(try ledger.pluginsWithPendingEvents() == ["p"])
        #expect(try ledger.transfers(plugin: "p").map(\.state) == [.finished])
    }
}
