import Foundation
import Testing

// The scenario file's size limit (docs/guarantees.md, "Size limits"): `simulate` reads at most
// 1 MiB and one byte, whatever the input is (a file, standard input, a FIFO, /dev/zero), and
// refuses more with 65 and a message naming the limit. An input without an end must not hold it.

/// The limit: Scenario.maximumBytes.
private let limit = 1 << 20

/// How long a refusal may take: the process starts, reads 1 MiB and exits, which takes well under
/// a second; a run that reads an endless input to its end never returns at all.
private let bound = 20.0

/// Runs lifeline with `stdin` as standard input; kills it and returns nil when it has not ended
/// within `bound` seconds.
private func runWithin(_ arguments: [String], stdin: Any? = nil) throws -> CLI.Result? {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: CLI.binary)
    process.arguments = arguments
    let out = Pipe(), err = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = stdin ?? FileHandle.nullDevice
    let ended = DispatchSemaphore(value: 0)
    process.terminationHandler = { _ in ended.signal() }
    try process.run()
    let outData = Captured(out), errData = Captured(err)
    if ended.wait(timeout: .now() + bound) == .timedOut {
        kill(process.processIdentifier, SIGKILL)
        ended.wait()
        return nil
    }
    return CLI.Result(
        status: process.terminationStatus, stdout: outData.text(waitingForEOF: true),
        stderr: errData.text(waitingForEOF: true))
}

/// Writes scenario lines to `handle` until the reader goes away; returns at once.
private func writeForever(_ handle: FileHandle) {
    signal(SIGPIPE, SIG_IGN)
    let fd = handle.fileDescriptor
    Thread.detachNewThread {
        let chunk = [UInt8](String(repeating: "0s fetch\n", count: 7000).utf8)
        while chunk.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        try? handle.close()
    }
}

private func expectRefused(_ result: CLI.Result?, naming name: String, sourceLocation: SourceLocation = #_sourceLocation) {
    guard let result else {
        Issue.record("simulate did not end within \(bound) s", sourceLocation: sourceLocation)
        return
    }
    #expect(result.status == 65, "\(result.stderr)", sourceLocation: sourceLocation)
    #expect(
        result.stderr.contains("cannot read scenario file \(name): it is larger than 1 MiB, the most a scenario may hold"),
        "\(result.stderr)", sourceLocation: sourceLocation)
}

@Suite struct ScenarioSizeCLITests {
    @Test func simulate_devZero_isRefusedAtTheLimit() throws {
        let ws = try Workspace()
        let r = try runWithin(["simulate", "--plugins", ws.plugins, "--scenario", "/dev/zero"])
        expectRefused(r, naming: "'/dev/zero'")
    }

    @Test func simulate_endlessStandardInput_isRefusedAtTheLimit() throws {
        let ws = try Workspace()
        let pipe = Pipe()
        writeForever(pipe.fileHandleForWriting)
        let r = try runWithin(["simulate", "--plugins", ws.plugins, "--scenario", "-"], stdin: pipe)
        expectRefused(r, naming: "standard input")
    }

    @Test func simulate_oversizeStandardInput_isRefused_andOneAtTheLimitRuns() throws {
        let ws = try Workspace()
        // A valid scenario padded with a comment to exactly the limit, then one byte more.
        let head = "0s launch\n#"
        let atLimit = head + String(repeating: "x", count: limit - head.utf8.count)
        for (text, refused) in [(atLimit, false), (atLimit + "x", true)] {
            let path = try ws.file("in.scenario", text)
            let r = try runWithin(
                ["simulate", "--plugins", ws.plugins, "--scenario", "-"], stdin: FileHandle(forReadingAtPath: path))
            if refused {
                expectRefused(r, naming: "standard input")
            } else {
                #expect(r?.status == 0, "\(r?.stderr ?? "did not end")")
            }
        }
    }

    @Test func simulate_oversizeFile_isRefusedFromItsSize_andOneAtTheLimitRuns() throws {
        let ws = try Workspace()
        let head = "0s launch\n#"
        let atLimit = try ws.file("at.scenario", head + String(repeating: "x", count: limit - head.utf8.count))
        #expect(try runWithin(["simulate", "--plugins", ws.plugins, "--scenario", atLimit])?.status == 0)
        // A sparse file of 1 TiB: reading it to its end would take long, its size says it all.
        let huge = ws.path + "/huge.scenario"
        #expect(FileManager.default.createFile(atPath: huge, contents: Data("0s launch\n".utf8)))
        #expect(truncate(huge, 1 << 40) == 0)
        expectRefused(try runWithin(["simulate", "--plugins", ws.plugins, "--scenario", huge]), naming: "'\(huge)'")
    }

    @Test func simulate_endlessFIFO_isRefusedAtTheLimit() throws {
        let ws = try Workspace()
        let fifo = ws.path + "/fifo.scenario"
        #expect(mkfifo(fifo, 0o600) == 0)
        // The writer opens the FIFO once simulate opens it for reading.
        Thread.detachNewThread {
            if let handle = FileHandle(forWritingAtPath: fifo) { writeForever(handle) }
        }
        let r = try runWithin(["simulate", "--plugins", ws.plugins, "--scenario", fifo])
        expectRefused(r, naming: "'\(fifo)'")
    }

    /// A `--config` value is read as TOML: the longest argument Linux passes (128 KiB) holds 60,000
    /// numbers, which took 12 s when each compiled a regular expression (0.2 ms each in a debug
    /// build). The run takes under 2 s now, on a busy machine.
    @Test func simulate_configValueOfManyNumbers_isReadQuickly() throws {
        let ws = try Workspace()
        try ws.plugin("p", "local n = #lifeline.config.v\nlifeline.log.info('numbers: ' .. n)\n")
        let count = 60_000
        let value = "[" + String(repeating: "1,", count: count - 1) + "1]"
        let scenario = try ws.file("s.scenario", "0s launch\n")
        let start = ContinuousClock.now
        let r = try runWithin(["simulate", "--plugins", ws.plugins, "--scenario", scenario, "--config", "v=" + value])
        let seconds = (ContinuousClock.now - start) / .seconds(1)
        #expect(r?.status == 0, "\(r?.stderr ?? "did not end")")
        #expect(r?.stderr.contains("numbers: \(count)") == true, "\(r?.stderr ?? "")")
        #expect(seconds < 6, "took \(seconds) s")
    }
}
