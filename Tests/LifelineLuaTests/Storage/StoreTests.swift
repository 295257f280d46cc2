import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// The store from Lua: lifeline.store, a plugin's durable key-value store in the state dir's SQLite file.


@Test func store_values_readBackAsWritten_integersStayIntegers() throws {
    let source = """
        local s = lifeline.store
        s.set('i', 3); s.set('f', 3.0); s.set('x', 0.1); s.set('b', false); s.set('s', 'h\\0é')
        s.set('t', {name = 'n', list = {1, 2.5, 'three', true}, nested = {deep = {deeper = 'yes'}}, empty = {}})
        mark(math.type(s.get('i')) .. ',' .. math.type(s.get('f')) .. ',' .. tostring(s.get('x') == 0.1))
        mark(tostring(s.get('b')) .. ',' .. tostring(s.get('s') == 'h\\0é') .. ',' .. tostring(s.get('missing')))
        local t = s.get('t')
        mark(t.name .. ',' .. #t.list .. ',' .. t.list[2] .. ',' .. t.list[3] .. ',' .. tostring(t.list[4]))
        mark(t.nested.deep.deeper .. ',' .. type(t.empty) .. ',' .. math.type(t.list[1]))
        """
    #expect(try marksOf(source) == ["integer,float,true", "false,true,nil", "n,4,2.5,three,true", "yes,table,integer"])
}

@Test func store_keys_areSortedAndFilteredByPrefix_deleteSaysWhetherTheKeyWasThere() throws {
    let source = """
        local s = lifeline.store
        for _, k in ipairs({'b/2', 'a', 'b/1', 'c', 'b/10'}) do s.set(k, k) end
        mark(table.concat(s.keys('b/'), ' ')); mark(table.concat(s.keys(), ' '))
        mark(tostring(s.delete('a')) .. ',' .. tostring(s.delete('a')) .. ',' .. #s.keys())
        mark(#s.keys('zzz'))
        """
    #expect(try marksOf(source) == ["b/1 b/10 b/2", "a b/1 b/10 b/2 c", "true,false,4", "0"])
}

@Test func store_persistsAcrossKillAndLaunch_andAcrossHosts() throws {
    let source = """
        local n = (lifeline.store.get('launches') or 0) + 1
        lifeline.store.set('launches', n)
        mark(n)
        """
    try withDatabase { database in
        let first = try simulate(plugins(["p": source]), scenario: "0s launch\n1s kill\n2s launch\n3s terminate\n4s launch",
            database: database)
        #expect(marks(first) == ["1", "2", "3"])
        // Another host on the same state dir: what the first one stored is there.
        let second = try simulate(plugins(["p": source]), database: database)
        #expect(marks(second) == ["4"])
    }
}

@Test func store_simulateWithoutAStateDir_startsEmptyEachTime() throws {
    let source = "local n = (lifeline.store.get('n') or 0) + 1; lifeline.store.set('n', n); mark(n)"
    #expect(try marksOf(source) == ["1"])
    #expect(try marksOf(source) == ["1"])
}

@Test func store_eachPluginSeesOnlyItsOwnKeys() throws {
    let recorder = try simulate(plugins([
        "a": "lifeline.store.set('k', 'from a'); lifeline.store.set('only-a', 1)",
        "b": "lifeline.store.set('k', 'from b'); mark(lifeline.store.get('k')); mark(#lifeline.store.keys()); "
            + "mark(tostring(lifeline.store.get('only-a')))",
    ]))
    #expect(marks(recorder) == ["from b", "1", "nil"])
}

@Test func store_quota_isAClearError_andKeepsTheOldValue() throws {
    var files = plugins(["p": """
        local s = lifeline.store
        s.set('small', 'x')
        local ok, err = pcall(s.set, 'big', string.rep('y', 2000))
        mark(tostring(ok)); mark(err)
        mark(tostring(s.get('big')) .. ',' .. s.get('small'))
        ok = pcall(s.set, 'small', string.rep('z', 1000))
        mark(tostring(ok) .. ',' .. #s.get('small'))
        mark(tostring(s.delete('small')))
        """])
    files["p/plugin.toml"] = "[limits]\nstore = \"1KiB\"\n"
    let result = try marks(simulate(files))
    try #require(result.count == 5, "\(result)")
    #expect(result[0] == "false")
    #expect(result[1].contains("over its quota of 1 KiB") && result[1].contains("[limits] store"), "\(result[1])")
    #expect(result[2] == "nil,x")
    #expect(result[3] == "true,1000")
    #expect(result[4] == "true")
}

@Test func store_quota_badValueInPluginToml_isALoadErrorWithFileAndLine() throws {
    var files = plugins(["p": "mark('loaded')"])
    files["p/plugin.toml"] = "[limits]\nstore = \"lots\"\n"
    let error = try simulationError(files)
    #expect(error?.exitCode == 65)
    #expect(error?.message.contains("plugin.toml:2") == true, "\(String(describing: error))")
    #expect(error?.message.contains("[limits] store") == true)
}

@Test func store_transaction_writesEverythingOrNothing() throws {
    let source = """
        local s = lifeline.store
        s.set('a', 1)
        s.transaction(function()
          s.set('a', 2); s.set('b', 2); s.delete('a')
          mark('inside:' .. tostring(s.get('a')) .. ',' .. s.get('b') .. ',' .. table.concat(s.keys(), ' '))
        end)
        mark('after:' .. tostring(s.get('a')) .. ',' .. s.get('b'))
        local ok, err = pcall(s.transaction, function() s.set('b', 3); s.set('c', 3); error('boom') end)
        mark(tostring(ok) .. ',' .. tostring(err:find('boom') ~= nil))
        mark('rolled back:' .. s.get('b') .. ',' .. tostring(s.get('c')))
        """
    #expect(try marksOf(source) == ["inside:nil,2,b", "after:nil,2", "false,true", "rolled back:2,nil"])
}

@Test func store_canonicallyEquivalentKeys_stayApart_inAndOutOfTransactions() throws {
    let source = """
        local s = lifeline.store
        s.transaction(function() s.set('\\u{E9}', 1); s.set('e\\u{301}', 2) end)
        mark(#s.keys() .. ',' .. s.get('\\u{E9}') .. ',' .. s.get('e\\u{301}'))
        s.set('\\u{E9}', 3)
        mark(s.get('\\u{E9}') .. ',' .. s.get('e\\u{301}'))
        """
    #expect(try marksOf(source) == ["2,1,2", "3,2"])
}

@Test func store_transaction_overTheQuota_writesNothing() throws {
    var files = plugins(["p": """
        local s = lifeline.store
        local ok, err = pcall(s.transaction, function() s.set('a', 'x'); s.set('b', string.rep('y', 2000)) end)
        mark(tostring(ok) .. ',' .. tostring(err:find('quota') ~= nil) .. ',' .. tostring(s.get('a')))
        """])
    files["p/plugin.toml"] = "[limits]\nstore = 1024\n"
    #expect(try marks(simulate(files)) == ["false,true,nil"])
}

@Test func store_transaction_mayNotWait_orNest() throws {
    let source = """
        local s = lifeline.store
        local ok, err = pcall(s.transaction, function() s.transaction(function() end) end)
        mark(tostring(ok)); mark(err)
        lifeline.background('bg', function()
          local ok2, err2 = pcall(s.transaction, function() s.set('w', 1); lifeline.sleep(1) end)
          mark(tostring(ok2)); mark(tostring(err2)); mark(tostring(s.get('w')))
          s.transaction(function() s.set('after', 1) end)
          mark(s.get('after'))
        end)
        """
    let result = try marksOf(source)
    try #require(result.count == 6, "\(result)")
    #expect(result[0] == "false")
    #expect(result[1].contains("transactions do not nest"))
    #expect(result[2] == "false")
    #expect(result[3].contains("lifeline.sleep cannot wait inside lifeline.store.transaction"), "\(result[3])")
    #expect(result[4] == "nil")
    #expect(result[5] == "1")
}

@Test func store_transaction_stoppedByTheWatchdog_writesNothing() throws {
    try withDatabase { database in
        let recorder = try simulate(plugins(["p": """
            lifeline.on('didEnterBackground', function()
              lifeline.store.transaction(function() lifeline.store.set('half', 1); while true do end end)
            end)
            """]), scenario: "0s launch\n1s background", database: database)
        #expect(recorder.termination?.kind == .watchdog)
        let store = PluginStore(plugin: "p", quota: PluginStore.defaultQuota, database: database)
        #expect(try store.get("half") == nil)
    }
}

@Test(arguments: [
    ("lifeline.store.set(1, 'v')", "bad argument #1 to 'lifeline.store.set' (string expected, got number)"),
    ("lifeline.store.get({})", "bad argument #1 to 'lifeline.store.get' (string expected, got table)"),
    ("lifeline.store.set('k')", "a value expected (use lifeline.store.delete"),
    ("lifeline.store.set('k', print)", "cannot store a function"),
    ("lifeline.store.set('k', 0/0)", "only finite numbers"),
    ("lifeline.store.set('k', {1, 2, x = 3})", "both string keys and integer keys"),
    ("lifeline.store.set('k', {[1.5] = 1})", "cannot store a table with a number key"),
    ("local t = {}; t[1] = t; lifeline.store.set('k', t)", "contains itself"),
    ("lifeline.store.set('', 1)", "must not be empty"),
    ("lifeline.store.set(string.rep('k', 2000), 1)", "at most 1024 bytes"),
    ("lifeline.store.transaction(42)", "function expected"),
    ("lifeline.store.set('\\xff', 1)", "a key must be valid UTF-8"),
    ("lifeline.store.set('k', 'bad \\xff')", "not valid UTF-8"),
    ("lifeline.store.set('k', {['\\xfe'] = 1})", "key that is not valid UTF-8"),
    ("lifeline.store.keys(3)", "bad argument #1 to 'lifeline.store.keys' (string expected, got number)"),
])
func store_badInput_isALuaErrorThatSaysWhy(_ call: String, _ expected: String) throws {
    let result = try marksOf("local ok, err = pcall(function() \(call) end); mark(tostring(ok)); mark(tostring(err))")
    #expect(result.first == "false")
    #expect(result.last?.contains(expected) == true, "\(result)")
}

@Test func store_keysThatDifferAfterANUL_stayApart_andSurviveAnotherHost() throws {
    let writer = """
        local s = lifeline.store
        s.set('user\\0alice', 'A'); s.set('user\\0bob', 'B'); s.set('user', 'plain')
        lifeline.store.transaction(function() s.set('tx\\0one', 1); s.set('tx\\0two', 2) end)
        """
    let reader = """
        local s = lifeline.store
        mark(s.get('user\\0alice') .. s.get('user\\0bob') .. s.get('user') .. s.get('tx\\0one') .. s.get('tx\\0two'))
        local keys = s.keys('user\\0')
        mark(#keys .. ':' .. (keys[1] == 'user\\0alice' and 'alice' or '?') .. ',' .. (keys[2] == 'user\\0bob' and 'bob' or '?'))
        mark(tostring(s.delete('user\\0alice')) .. ',' .. tostring(s.get('user\\0bob')) .. ',' .. #s.keys())
        """
    try withDatabase { database in
        _ = try simulate(plugins(["p": writer]), database: database)
        let recorder = try simulate(plugins(["p": reader]), database: database)
        #expect(pluginErrors(recorder).isEmpty, "\(pluginErrors(recorder))")
        #expect(marks(recorder) == ["ABplain12", "2:alice,bob", "true,B,4"])
    }
}
