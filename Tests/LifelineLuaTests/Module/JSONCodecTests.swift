import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// lifeline.json's codec (Sources/CLuaShims/json.c): what it writes and reads, what it refuses,
// and that it allocates only inside the plugin's memory cap.

/// The marks of `source`, run as plugin "p" (with `markPrelude`).
private func json(_ source: String) throws -> [String] { try marksOf(source) }

/// Lua that makes `hex(s)`: a string's bytes in hex, so marks can show any byte.
private let hexPrelude = """
    local function hex(s) return (s:gsub('.', function(c) return string.format('%02x', c:byte()) end)) end

    """

@Suite struct JSONCodecTests {
    @Test func encode_everyASCIIByte_escapesControlsAndQuotes_andDecodesBackToTheSameBytes() throws {
        let marks = try json("""
            local all = {}
            for i = 0, 127 do all[#all + 1] = string.char(i) end
            all = table.concat(all)
            local text = lifeline.json.encode(all)
            mark(text)
            mark(tostring(lifeline.json.decode(text) == all))
            """)
        let expected =
            #""\u0000\u0001\u0002\u0003\u0004\u0005\u0006\u0007\b\t\n\u000b\f\r\u000e\u000f\u0010\u0011\u0012"#
            + ##"\u0013\u0014\u0015\u0016\u0017\u0018\u0019\u001a\u001b\u001c\u001d\u001e\u001f !\"#$%&'()*+,-./"##
            + #"0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~\u007f""#
        #expect(marks == [expected, "true"])
    }

    @Test func decode_everyEscape_givesItsBytes_NULIncluded() throws {
        let marks = try json(hexPrelude + """
            local s = lifeline.json.decode([["\\"\\\\\\/\\b\\f\\n\\r\\t\\u0000\\u00e9\\u20AC\\ud83d\\ude00x"]])
            mark(#s); mark(hex(s))
            mark(tostring(s == '"\\\\/\\b\\f\\n\\r\\t\\0é€😀x'))
            """)
        #expect(marks == ["19", "225c2f080c0a0d0900c3a9e282acf09f9880" + "78", "true"])
    }

    @Test func roundTrip_stringsWithNULAndUnicode_keepEveryByte() throws {
        let marks = try json(hexPrelude + """
            local cases = {'a\\0b', '\\0', '\\0\\0\\0', 'é😀\\u{10FFFF}', string.rep('\\0x', 1000)}
            for _, s in ipairs(cases) do
              local back = lifeline.json.decode(lifeline.json.encode(s))
              mark(tostring(back == s) .. ' ' .. #back)
            end
            local t = lifeline.json.decode(lifeline.json.encode({['k\\0ey'] = 'v\\0al'}))
            mark(hex(next(t)) .. '=' .. hex(t['k\\0ey']))
            """)
        #expect(marks == ["true 3", "true 1", "true 3", "true 10", "true 2000", "6b006579=7600616c"])
    }

    @Test(arguments: [
        ("\\xff", "a lone continuation-range byte"),
        ("\\xc0\\xaf", "an overlong '/'"),
        ("\\xed\\xa0\\x80", "a UTF-16 surrogate written in UTF-8"),
        ("\\xf4\\x90\\x80\\x80", "a code point above U+10FFFF"),
        ("a\\xe2\\x82", "a sequence cut short"),
    ])
    func invalidUTF8_isRefusedBothWays(_ bytes: String, _ what: String) throws {
        let marks = try json("""
            local s = '\(bytes)'
            local text, err = lifeline.json.encode(s); mark(tostring(text)); mark(err)
            local _, keyErr = lifeline.json.encode({[s] = 1}); mark(keyErr)
            local value, err2 = lifeline.json.decode('"' .. s .. '"'); mark(tostring(value)); mark(err2)
            """)
        #expect(marks.count == 5, "\(what): \(marks)")
        #expect(marks[0] == "nil")
        #expect(marks[1].hasPrefix("Cannot serialise string: invalid UTF-8 at byte"), "\(what): \(marks)")
        #expect(marks[2].hasPrefix("Cannot serialise string: invalid UTF-8"), "\(what): \(marks)")
        #expect(marks[3] == "nil")
        #expect(marks[4].hasPrefix("Expected value but found invalid UTF-8 at character"), "\(what): \(marks)")
    }

    @Test(arguments: [#"\ud83d"#, #"\ude00"#, #"\ud83dx"#, #"\ud83d\u0041"#, #"\u12"#, #"\uzzzz"#])
    func decode_loneSurrogateOrBadUnicodeEscape_isRefused(_ escape: String) throws {
        let marks = try json("""
            local value, err = lifeline.json.decode([["\(escape)"]]); mark(tostring(value)); mark(err)
            """)
        #expect(marks == ["nil", "Expected value but found invalid unicode escape code at character 2"])
    }

    @Test func depth_128LevelsPass_129AreRefused_bothWays() throws {
        let marks = try json("""
            local function nest(n) local t = {} local c = t for i = 2, n do c[1] = {} c = c[1] end return t end
            mark(#lifeline.json.encode(nest(128)))
            mark(select(2, lifeline.json.encode(nest(129))))
            mark(type(lifeline.json.decode(string.rep('[', 128) .. string.rep(']', 128))))
            mark(select(2, lifeline.json.decode(string.rep('[', 129) .. string.rep(']', 129))))
            mark(select(2, lifeline.json.decode(string.rep('{"a":', 129) .. '1' .. string.rep('}', 129))))
            local cycle = {}; cycle.self = cycle
            mark(select(2, lifeline.json.encode(cycle)))
            """)
        #expect(marks == [
            "256",  // 127 arrays around the innermost table, an empty object: [[...[{}]...]]
            "Cannot serialise, excessive nesting (129)",
            "table",
            "Found too many nested data structures (129) at character 129",
            "Found too many nested data structures (129) at character 641",
            "Cannot serialise, excessive nesting (129)",
        ])
    }

    @Test func numbers_integersStayExact_floatsRoundTrip() throws {
        let marks = try json("""
            local function show(text) local v = lifeline.json.decode(text) return tostring(v) .. ':' .. math.type(v) end
            mark(show('3')); mark(show('-42')); mark(show('3.0')); mark(show('1e2')); mark(show('-0.5E-1'))
            mark(show('9223372036854775807')); mark(show('-9223372036854775808')); mark(show('9223372036854775808'))
            local e = lifeline.json.encode
            mark(e(math.maxinteger) .. ' ' .. e(math.mininteger) .. ' ' .. e((1 << 53) + 1))
            mark(e(0.1) .. ' ' .. e(0.1 + 0.2) .. ' ' .. e(1 / 3) .. ' ' .. e(3.0) .. ' ' .. e(1e300) .. ' ' .. e(-2.5))
            for _, x in ipairs({0.1 + 0.2, 1 / 3, 5e-324, 1.7976931348623157e308, -123.456}) do
              assert(lifeline.json.decode(e(x)) == x, 'round trip of ' .. e(x))
            end
            mark('ok')
            """)
        #expect(marks == [
            "3:integer", "-42:integer", "3.0:float", "100.0:float", "-0.05:float",
            "9223372036854775807:integer", "-9223372036854775808:integer", "9.2233720368548e+18:float",
            "9223372036854775807 -9223372036854775808 9007199254740993",
            "0.1 0.30000000000000004 0.3333333333333333 3 1e+300 -2.5",
            "ok",
        ])
    }

    @Test(arguments: [
        "01", "+1", ".5", "1.", "1e", "-", "0x10", "NaN", "Infinity", "-Infinity", "[1,]", "{\"a\":1,}", "[1] x",
        "'a'", "\"tab\there\"", "\"new\nline\"", "[1]\u{0}", "{a:1}", "[1 2]", "tru", "nul", "// c\n1",
    ])
    func decode_anythingButStrictJSON_isNilAndAMessageWithThePosition(_ text: String) throws {
        let literal = text.unicodeScalars.map { String(format: "\\%d", $0.value) }.joined()
        let marks = try json("local v, err = lifeline.json.decode('\(literal)'); mark(tostring(v)); mark(err)")
        #expect(marks.count == 2)
        #expect(marks.first == "nil", "\(text): \(marks)")
        #expect(marks.last?.contains(" at character ") == true, "\(text): \(marks)")
    }

    @Test func encode_tables_arraysObjectsAndWhatIsRefused() throws {
        let marks = try json("""
            local e = lifeline.json.encode
            local function show(v) local text, err = e(v) mark(text or ('nil: ' .. err)) end
            show({}); show({1, 2, 3}); show({[3] = 'x'}); show({1, nil, 3}); show({[1] = 1, [20] = 2})
            show({[1] = 'a', x = 'b'}); show({[1.5] = 'a'}); show({[0] = 'z'}); show({[true] = 1})
            show({[1] = 1, ['1'] = 2}); show({n = 0 / 0}); show({n = math.huge}); show({f = print})
            show(coroutine.create(print)); show(lifeline.after(100, function() end)); show(nil)
            show(lifeline.json.null); show({lifeline.json.null}); show(true); show('a/b')
            show(setmetatable({}, {__index = function() return 1 end}))
            """)
        #expect(marks == [
            "{}", "[1,2,3]", "[null,null,\"x\"]", "[1,null,3]", "nil: Cannot serialise table: excessively sparse array",
            "{\"1\":\"a\",\"x\":\"b\"}", "{\"1.5\":\"a\"}", "{\"0\":\"z\"}",
            "nil: Cannot serialise boolean: table key must be a number or string",
            "{\"1\":1,\"1\":2}", "nil: Cannot serialise number: must not be NaN or Inf",
            "nil: Cannot serialise number: must not be NaN or Inf", "nil: Cannot serialise function: type not supported",
            "nil: Cannot serialise thread: type not supported", "nil: Cannot serialise userdata: type not supported",
            "null", "null", "[null]", "true", "\"a/b\"", "{}",
        ])
    }

    @Test func encode_objectKeys_areInByteOrder_whateverTheInsertionOrder() throws {
        let marks = try json("""
            local names = {'zeta', 'alpha', 'Beta', 'a', 'ab', '10', '9', 'é', '_', 'mid'}
            local forward, backward = {}, {}
            for i = 1, #names do forward[names[i]] = i end
            for i = #names, 1, -1 do backward[names[i]] = i end
            mark(lifeline.json.encode(forward)); mark(tostring(lifeline.json.encode(backward) == lifeline.json.encode(forward)))
            mark(lifeline.json.encode({[10] = 'x', [9] = 'y', b = 1}))
            """)
        #expect(marks == [
            #"{"10":6,"9":7,"Beta":3,"_":9,"a":4,"ab":5,"alpha":2,"mid":10,"zeta":1,"é":8}"#, "true",
            #"{"10":"x","9":"y","b":1}"#,
        ])
    }

    @Test func encode_sameTable_givesAByteIdenticalReportOnEveryRun() throws {
        // Lua seeds its string hashes at random in each state, so next() order changes per run.
        let source = """
            local t = {}
            for i = 1, 40 do t['k' .. i] = i % 3 == 0 or i end
            mark(lifeline.json.encode(t))
            """
        var reports: Set<String> = []
        for _ in 0..<4 {
            reports.insert(try simulate(plugins(["p": source])).report().serialized(pretty: true))
        }
        #expect(reports.count == 1)
        #expect(try json("mark(lifeline.json.encode({b = 1, a = 2, c = {z = 1, y = 2}}))")
            == [#"{"a":2,"b":1,"c":{"y":2,"z":1}}"#])
    }

    @Test func badArguments_raiseAnErrorThatNamesTheCall() throws {
        let marks = try json("""
            mark(select(2, pcall(lifeline.json.encode)))
            mark(select(2, pcall(lifeline.json.encode, 1, 2)))
            mark(select(2, pcall(lifeline.json.decode, {})))
            mark(select(2, pcall(lifeline.json.decode)))
            mark(tostring(lifeline.json.decode(42)))
            """)
        #expect(marks == [
            "bad argument #1 to 'lifeline.json.encode' (expected 1 argument)",
            "bad argument #1 to 'lifeline.json.encode' (expected 1 argument)",
            "bad argument #1 to 'lifeline.json.decode' (string expected, got table)",
            "bad argument #1 to 'lifeline.json.decode' (expected 1 argument)",
            "42",
        ])
    }

    // MARK: - The memory cap

    /// A plugin capped at 256 KiB: the JSON it asks for, 125 MB of it (a 1,000-byte string
    /// reached 125,000 times through shared tables), and 25,000 tables to decode, cannot fit.
    static let bomb = """
        local leaf = {string.rep('x', 1000)}
        local t = leaf
        for _ = 1, 3 do local n = {} for j = 1, 50 do n[j] = t end t = n end
        local ok, err = pcall(lifeline.json.encode, t)
        mark(tostring(ok) .. ' ' .. tostring(err))
        t, leaf = nil, nil
        local text = '[' .. string.rep('{},', 25000) .. '{}]'
        local ok2, err2 = pcall(lifeline.json.decode, text)
        mark(tostring(ok2) .. ' ' .. tostring(err2))
        text = nil
        collectgarbage()
        mark(lifeline.json.encode({still = 'works'}))
        """

    @Test func pastTheCap_encodeAndDecode_failWithLuasMemoryError_andThePluginGoesOn() throws {
        let cap = 256 * 1024
        let box = PluginBox()
        try withPluginFolder(["p/init.lua": markPrelude + Self.bomb]) { dir in
            let host = makeHost([capturingDescriptor(name: "p", directory: dir + "/p", memoryLimit: cap, box: box)])
            defer { host.shutdown() }
            try host.perform(.launch)
            #expect(marks(host.recorder) == [
                "false not enough memory", "false not enough memory", #"{"still":"works"}"#,
            ])
            #expect(host.recorder.pluginErrorCount == 0)
            #expect(try #require(box.plugin).memoryUsed <= cap)
        }
    }
}
