import Testing

@testable import LifelineRules

// The units every room reads: durations, byte counts and the clock's resolution. The scenario
// tests hold the duration forms and messages as a scenario file shows them; these hold the
// functions themselves.

// MARK: - Durations

@Test func units_parseDuration_readsEachUnitAndTheirSums() throws {
    #expect(try Units.parseDuration("250ms", at: "t") == .seconds(0.25))
    #expect(try Units.parseDuration("1.5s", at: "t") == .seconds(1.5))
    #expect(try Units.parseDuration("2m", at: "t") == .seconds(120))
    #expect(try Units.parseDuration("1h", at: "t") == .seconds(3600))
    #expect(try Units.parseDuration("1h1m1s1ms", at: "t") == HostTime(nanoseconds: 3_661_001_000_000))
    #expect(try Units.parseDuration(".5s", at: "t") == .seconds(0.5))
}

@Test func units_parseDuration_startsItsMessageWithWhereTheTextCameFrom() throws {
    let message = "--until: '5m10' ends with a number without a unit; put one after every number, as in 5m10s"
    #expect(throws: LifelineError.badInput(message)) { try Units.parseDuration("5m10", at: "--until") }
    #expect(throws: LifelineError.badInput("x.scenario:2: unknown unit 'd' in '5d'; use ms, s, m or h")) {
        try Units.parseDuration("5d", at: "x.scenario:2")
    }
}

@Test func units_parseDuration_goesUpToMaximumSeconds() throws {
    #expect(Units.maximumSeconds == 100 * 365 * 24 * 3600)
    #expect(try Units.parseDuration("876000h", at: "t") == .seconds(Units.maximumSeconds))
    #expect(throws: LifelineError.badInput("t: '876000h1ms' is too far: times go up to 100 years")) {
        try Units.parseDuration("876000h1ms", at: "t")
    }
}

// MARK: - The clock

@Test func units_clockDelay_isNeverBelowTheResolution() {
    #expect(Units.clockResolution == 0.001)
    #expect(Units.clockDelay(0) == Units.clockResolution)
    #expect(Units.clockDelay(-5) == Units.clockResolution)
    #expect(Units.clockDelay(.nan) == Units.clockResolution)
    #expect(Units.clockDelay(0.0005) == Units.clockResolution)
    #expect(Units.clockDelay(2.5) == 2.5)
}

// MARK: - Byte counts

@Test(arguments: [
    ("512", 512), ("0", 0), ("7B", 7), ("64MiB", 64 << 20), ("2KiB", 2048), ("1GiB", 1 << 30),
    ("50MB", 50_000_000), ("3KB", 3_000), ("1GB", 1_000_000_000), (" 64 MiB\t", 64 << 20),
])
func units_parseByteCount_readsANumberAndAUnit(_ c: (String, Int)) throws {
    let (text, bytes) = c
    #expect(try Units.parseByteCount(text) == bytes, "\(text)")
}

@Test(arguments: ["", "MiB", "64mib", "64 MiBs", "-1", "1.5MB", "64TB", "0x10"])
func units_parseByteCount_refusesWhatIsNoSize(_ text: String) {
    #expect(throws: Units.ByteCountError.notASize) { try Units.parseByteCount(text) }
}

@Test func units_parseByteCount_refusesACountPastInt() throws {
    #expect(throws: Units.ByteCountError.tooLarge) { try Units.parseByteCount("9223372036854775808") }
    #expect(throws: Units.ByteCountError.tooLarge) { try Units.parseByteCount("9223372036854775807GiB") }
    #expect(try Units.parseByteCount("9223372036854775807") == Int.max)
}

@Test func units_parseByteCount_readsSubstringsToo() throws {
    let line = "size=50MB rate=2MB/s"
    let size = line.split(separator: " ")[0].dropFirst("size=".count)
    #expect(try Units.parseByteCount(size) == 50_000_000)
}

@Test(arguments: [
    (512 << 20, "512 MiB"), (1 << 30, "1 GiB"), (3 << 10, "3 KiB"), (50_000_000, "50 MB"), (2_000, "2 KB"),
    (5_000_000_000, "5 GB"), (1_536, "1536 bytes"), (999, "999 bytes"), (0, "0 GiB"),
])
func units_formatBytes_usesTheLargestWholeUnitBinaryFirst(_ c: (Int, String)) {
    let (bytes, text) = c
    #expect(Units.formatBytes(bytes) == text)
}

@Test func units_formatBytes_readsBackAsTheSameCount() throws {
    for bytes in [1, 999, 1_024, 1_000, 4 << 20, 64_000_000, 3 << 30, 123_456_789] {
        // "1536 bytes" reads back as "1536"; "3 GiB" as it is, the blank allowed.
        let text = Units.formatBytes(bytes)
        let readable = text.hasSuffix(" bytes") ? String(text.dropLast(" bytes".count)) : text
        #expect(try Units.parseByteCount(readable) == bytes, "\(text)")
    }
}
