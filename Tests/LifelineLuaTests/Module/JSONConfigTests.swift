import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// What Lua sees of lifeline.json, lifeline.config, and network permissions.

@Test func json_roundTrip_keepsValuesAndNull() throws {
    let source = """
        local doc = {name = 'héllo', n = 3, x = 1.5, ok = true, list = {1, 2, 3}, nothing = lifeline.json.null,
                     nested = {deep = {deeper = 'yes'}}}
        local back = lifeline.json.decode(lifeline.json.encode(doc))
        mark(back.name .. ',' .. back.n .. ',' .. back.x .. ',' .. tostring(back.ok))
        mark(#back.list .. ':' .. back.list[3])
        mark(tostring(back.nothing == lifeline.json.null) .. ',' .. back.nested.deep.deeper)
        mark(lifeline.json.encode({1, 'two', lifeline.json.null}))
        """
    // Whole numbers decode as integers, as they were encoded.
    #expect(try marksOf(source) == ["héllo,3,1.5,true", "3:3", "true,yes", "[1,\"two\",null]"])
}

@Test(arguments: [
    ("[1, 2", "character"),
    ("{\"a\": }", "character"),
    ("nope", "character"),
    ("", "character"),
])
func json_badInput_returnsNilAndAnErrorWithThePosition(_ text: String, _ expected: String) throws {
    let source = """
        local value, err = lifeline.json.decode(\"\(text.replacingOccurrences(of: "\"", with: "\\\""))\")
        mark(tostring(value)); mark(tostring(err))
        """
    let result = try marksOf(source)
    #expect(result.first == "nil")
    #expect(result.last?.contains(expected) == true, "\(result)")
}

@Test func json_nestingDeeperThanTheCap_isAnErrorNotACrash() throws {
    let source = """
        local deep = string.rep('[', 100000) .. string.rep(']', 100000)
        local value, err = lifeline.json.decode(deep)
        mark(tostring(value)); mark(err)
        local t = {}
        local cur = t
        for i = 1, 1000 do cur.next = {}; cur = cur.next end
        local encoded, err2 = lifeline.json.encode(t)
        mark(tostring(encoded)); mark(err2)
        """
    let result = try marksOf(source)
    #expect(result.count == 4)
    #expect(result[0] == "nil")
    #expect(result[1].contains("too many nested"), "\(result)")
    #expect(result[2] == "nil")
    #expect(result[3].contains("excessive nesting"), "\(result)")
}

@Test func json_unsupportedValue_encodesToNilAndAnError() throws {
    let result = try marksOf("local s, err = lifeline.json.encode({f = print}); mark(tostring(s)); mark(err)")
    #expect(result.first == "nil")
    #expect(result.last?.contains("function") == true, "\(result)")
}

@Test func json_configurationFunctions_areNotExposed() throws {
    let source = """
        mark(tostring(lifeline.json.decode_max_depth)); mark(tostring(lifeline.json.encode_keep_buffer))
        """
    #expect(try marksOf(source) == ["nil", "nil"])
}

@Test func config_isPluginTomlsConfigTable() throws {
    let files = [
        "p/init.lua": markPrelude + """
            local c = lifeline.config
            mark(c.url .. ',' .. c.retries .. ',' .. c.ratio .. ',' .. tostring(c.verbose))
            mark(#c.hosts .. ':' .. c.hosts[2] .. ',' .. c.limits.max)
            """,
        "p/plugin.toml": """
            [config]
            url = "http://127.0.0.1:8080/end"
            retries = 3
            ratio = 0.5
            verbose = false
            hosts = ["a", "b"]
            limits = { max = 7 }
            """,
    ]
    let recorder = try simulate(files)
    #expect(marks(recorder) == ["http://127.0.0.1:8080/end,3,0.5,false", "2:b,7"])
}

@Test func config_withoutPluginToml_isAnEmptyTable() throws {
    #expect(try marksOf("mark(type(lifeline.config) .. ':' .. tostring(next(lifeline.config)))") == ["table:nil"])
}

// MARK: - Permissions

@Test func http_hostNotListed_isNotPermittedWithAMessageNamingHostAndKey() throws {
    let files = [
        "p/init.lua": markPrelude + """
            lifeline.background('call', function()
              local response, err = lifeline.http.request{url = 'http://api.example.com:8443/v1'}
              mark(tostring(response)); mark(err.kind); mark(err.message)
            end)
            """,
        "p/plugin.toml": "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n",
    ]
    let recorder = try simulate(files)
    let result = marks(recorder)
    #expect(result.count == 3)
    #expect(result[0] == "nil")
    #expect(result[1] == "notPermitted")
    #expect(result[2].contains("api.example.com:8443"), "\(result)")
    #expect(result[2].contains("[permissions] network"), "\(result)")
    #expect(result[2].contains("plugin 'p'"), "\(result)")
    let response = recorder.timeline.first { $0.event == "httpResponse" }
    #expect(response?["error"] == .string("notPermitted"))
}

@Test func http_withoutPermissions_everyHostIsDenied() throws {
    let source = """
        lifeline.background('call', function()
          local _, err = lifeline.http.request{url = 'http://127.0.0.1:9/'}
          mark(err.kind)
        end)
        """
    #expect(try marksOf(source) == ["notPermitted"])
}

@Test func permissions_badPattern_isALoadErrorWithFileAndLine() throws {
    let files = [
        "p/init.lua": "",
        "p/plugin.toml": "[permissions]\nnetwork = [\"127.0.0.1:http\"]\n",
    ]
    let error = try #require(try simulationError(files))
    #expect(error.message.contains("plugin.toml:2:"), "\(error.message)")
    #expect(error.message.contains("127.0.0.1:http"), "\(error.message)")
}

@Test(arguments: [
    (["127.0.0.1:*"], "127.0.0.1", 8080, true),
    (["127.0.0.1:*"], "127.0.0.2", 8080, false),
    (["api.example.com:443"], "api.example.com", 443, true),
    (["api.example.com:443"], "api.example.com", 80, false),
    (["api.example.com"], "api.example.com", 80, true),
    (["api.example.com"], "api.example.com", 8080, false),
    (["*.example.com:*"], "api.example.com", 1, true),
    (["*.example.com:*"], "example.com", 1, false),
    (["API.Example.com:443"], "api.example.com", 443, true),
    (["[::1]:*"], "::1", 80, true),
])
func permissions_match(_ patterns: [String], _ host: String, _ port: Int, _ allowed: Bool) throws {
    #expect(try NetworkPermissions(patterns).allows(host: host, port: port) == allowed)
}
