import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// A plugin's calls cannot crash the host: each case here once ended the whole process.

@Test func print_longFirstArgumentAndASecond_logsTheLineAndTheHostGoesOn() throws {
    let logs = LogLines()
    let source = """
        print(string.rep("a", 5000), 1)
        print(string.rep("e", 1500), 1)
        lifeline.log.info(string.rep("b", 70000), 2, "three")
        mark('loaded')
        lifeline.on('didEnterBackground', function()
          print(string.rep("c", 5000), 1)
          lifeline.log.warning(string.rep("d", 5000), {}, nil)
          mark('handled')
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background", logs: logs)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["loaded", "handled"])
    let lines = logs.lines
    #expect(lines.contains { $0 == "info: " + String(repeating: "a", count: 4096) + "…" })
    #expect(lines.contains { $0 == "info: " + String(repeating: "e", count: 1500) + "\t1" })
    #expect(lines.contains { $0.hasPrefix("info: " + String(repeating: "b", count: 4000)) && $0.hasSuffix("…") })
    #expect(lines.contains { $0 == "warning: " + String(repeating: "d", count: 4096) + "…" })
}

@Test func print_manyArgumentsWithTostringMetamethods_keepsTheirOrder() throws {
    let logs = LogLines()
    let source = """
        local big = setmetatable({}, {__tostring = function() return string.rep("x", 1500) end})
        print(big, "mid", big, 42)
        """
    _ = try simulate(plugins(["p": source]), logs: logs)
    let x = String(repeating: "x", count: 1500)
    #expect(logs.lines.contains("info: \(x)\tmid\t\(x)\t42"))
}

@Test func print_keepsNULBytes() throws {
    let logs = LogLines()
    _ = try simulate(plugins(["p": #"print("a\0b", "c\0")"#]), logs: logs)
    #expect(logs.lines.contains("info: a\u{0}b\tc\u{0}"), "\(logs.lines)")
}
