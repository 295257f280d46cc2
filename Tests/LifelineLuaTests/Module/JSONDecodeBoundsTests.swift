import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua

// lifeline.json.decode is linear in its input (docs/guarantees.md, "Size limits"): each 1 MiB worst
// case, built in Lua, is decoded (or refused) by a real plugin within a bound generous for a loaded
// CI machine and a debug build. The whole run is timed: loading the plugin and launching it take
// milliseconds.

/// Seconds. The decoder is C, so a case takes well under a second even in a debug build; the bound is
/// that of the Swift parsers' worst cases (ParserBoundsTests), generous for a busy machine.
private let bound = 10.0

@Test(arguments: [
    ("an array of many numbers", "'[' .. string.rep('1,', M // 2 - 1) .. '1]'", "table 524288"),
    ("an array of many floats", "'[' .. string.rep('-1.5e-3,', M // 8 - 1) .. '1]'", "table 131072"),
    ("an array of many strings", "'[' .. string.rep('\"ab\",', M // 5 - 1) .. '1]'", "table 209715"),
    ("an object of many keys", "keys(M // 16)", "table 0"),
    ("one string of escapes", "'\"' .. string.rep('\\\\u00e9', M // 6) .. '\"'", "string 349524"),
    ("one string of surrogate pairs", "'\"' .. string.rep('\\\\ud83d\\\\ude00', M // 12) .. '\"'", "string 349524"),
    ("one long string", "'\"' .. string.rep('a', M) .. '\"'", "string 1048576"),
    ("one huge integer", "string.rep('1', M)", "number"),
    ("one huge fraction", "'0.' .. string.rep('1', M)", "number"),
    ("deep arrays", "string.rep('[', M)", "nil Found too many nested data structures (129) at character 129"),
    ("deep objects", "string.rep('{\"a\":', M // 5)", "nil Found too many nested data structures (129) at character 641"),
    ("blanks", "string.rep(' \\t\\r\\n', M // 4) .. '1'", "number"),
    ("an unterminated string", "'\"' .. string.rep('a', M)", "nil Expected value but found unexpected end of string at character 1"),
])
func jsonDecode_worstCase_isLinear(_ name: String, _ text: String, _ expected: String) throws {
    let source = """
        local M = 1 << 20
        local function keys(n)
          local parts = {}
          for i = 1, n do parts[i] = string.format('"%011d":1', i) end
          return '{' .. table.concat(parts, ',') .. '}'
        end
        local text = \(text)
        local value, err = lifeline.json.decode(text)
        text = nil
        local shown = type(value)
        if type(value) == 'table' then shown = shown .. ' ' .. #value end
        if type(value) == 'string' then shown = shown .. ' ' .. #value end
        if value == nil then shown = shown .. ' ' .. err end
        mark(shown)
        """
    let start = ContinuousClock.now
    let marks = try marksOf(source)
    let seconds = (ContinuousClock.now - start) / .seconds(1)
    if ProcessInfo.processInfo.environment["LIFELINE_BOUNDS_TIMES"] != nil {
        print("bounds: lifeline.json.decode: \(name): \(String(format: "%.3f", seconds)) s")
    }
    #expect(marks == [expected])
    #expect(seconds < bound, "\(name) took \(seconds) s")
}
