import CLua
import CLuaShims
import Foundation
import LifelineTesting
import Testing

// lifeline.json.decode (Sources/CLuaShims/json.c) against documents it did not write, as
// Tests/LifelineTests/Report/JSONParseCorpusTests.swift holds JSONValue.parse to them: every JSON
// file of the toml-test corpus and every case of Tests/json-cases/accepted.txt must decode to what
// Foundation's JSONSerialization reads, and every case of Tests/json-cases/refused.txt (those that
// are not UTF-8 included: Lua strings are bytes) must be refused.

/// A bare Lua state holding lifeline.json at stack slot 1; nothing else of the host.
private final class LuaJSON {
    let L: OpaquePointer

    init() {
        L = luaL_newstate()!
        lifeline_open_json(L)  // stack: json
    }

    deinit { lua_close(L) }

    /// Decodes `bytes`; the value is left at slot 2 for `difference`. Returns nil, or why it refused.
    func decode(_ bytes: [UInt8]) -> String? {
        lua_settop(L, 1)
        lua_getfield(L, 1, "decode")  // stack: json, decode
        push(bytes)  // stack: json, decode, text
        guard lua_pcallk(L, 1, 2, 0, 0, nil) == LUA_OK else {
            return "raised: " + String(cString: lua_tolstring(L, -1, nil))  // stack: json, message
        }
        // stack: json, value, err
        guard lua_type(L, 2) != LUA_TNIL else { return String(cString: lua_tolstring(L, 3, nil)) }
        return nil
    }

    /// Pushes `bytes` as a Lua string, NUL bytes included.
    private func push(_ bytes: [UInt8]) {
        bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return _ = lua_pushlstring(L, "", 0) }
            _ = base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { lua_pushlstring(L, $0, buffer.count) }
        }
    }

    /// Where the Lua value at `index` differs from Foundation's `oracle`, or nil when they agree. An empty
    /// table stands for both [] and {}, as in lifeline.json.
    func difference(at index: Int32, _ oracle: Any, path: String = "$") -> String? {
        switch lua_type(L, index) {
        case LUA_TLIGHTUSERDATA where lua_touserdata(L, index) == nil:
            return oracle is NSNull ? nil : "\(path): null, expected \(oracle)"
        case LUA_TBOOLEAN:
            let b = lua_toboolean(L, index) != 0
            guard isBoolean(oracle), (oracle as? Bool) == b else { return "\(path): \(b), expected \(oracle)" }
            return nil
        case LUA_TNUMBER:
            guard let n = oracle as? NSNumber, !isBoolean(oracle) else {
                return "\(path): a number, expected \(oracle)"
            }
            if lua_isinteger(L, index) != 0 {
                let i = lua_tointegerx(L, index, nil)
                let integral = !["f", "d"].contains(String(cString: n.objCType))
                guard n.doubleValue == Double(i), !integral || n.int64Value == i else {
                    return "\(path): \(i), expected \(n)"
                }
                return nil
            }
            let d = lua_tonumberx(L, index, nil)
            return n.doubleValue == d ? nil : "\(path): \(d), expected \(n)"
        case LUA_TSTRING:
            var length = 0
            let p = lua_tolstring(L, index, &length)!
            let bytes = Array(UnsafeRawBufferPointer(start: p, count: length))
            return (oracle as? String).map { Array($0.utf8) } == bytes
                ? nil : "\(path): \(String(decoding: bytes, as: UTF8.self).debugDescription), expected \(oracle)"
        case LUA_TTABLE:
            return tableDifference(at: index, oracle, path: path)
        default:
            return "\(path): a Lua \(String(cString: lua_typename(L, lua_type(L, index)))), expected \(oracle)"
        }
    }

    private func tableDifference(at index: Int32, _ oracle: Any, path: String) -> String? {
        var integerKeys = 0, stringKeys = 0
        lua_pushnil(L)  // stack: ..., nil
        while lua_next(L, index) != 0 {  // stack: ..., key, value
            if lua_type(L, -2) == LUA_TSTRING { stringKeys += 1 } else if lua_isinteger(L, -2) != 0 { integerKeys += 1 }
            lua_settop(L, -2)  // stack: ..., key
        }  // stack: ...
        if let items = oracle as? [Any] {
            guard stringKeys == 0, integerKeys == items.count else { return "\(path): not an array of \(items.count)" }
            for (k, item) in items.enumerated() {
                lua_rawgeti(L, index, lua_Integer(k + 1))  // stack: ..., item
                defer { lua_settop(L, -2) }  // stack: ...
                guard lua_type(L, -1) != LUA_TNIL else { return "\(path)[\(k)]: missing" }
                if let d = difference(at: lua_gettop(L), item, path: "\(path)[\(k)]") { return d }
            }
            return nil
        }
        guard let fields = oracle as? [String: Any] else { return "\(path): a table, expected \(oracle)" }
        guard integerKeys == 0, stringKeys == fields.count else {
            return "\(path): not an object of \(fields.count) keys"
        }
        for (key, field) in fields {
            push(Array(key.utf8))  // stack: ..., key
            lua_rawget(L, index)  // stack: ..., field
            defer { lua_settop(L, -2) }  // stack: ...
            guard lua_type(L, -1) != LUA_TNIL else { return "\(path): no key \(key.debugDescription)" }
            if let d = difference(at: lua_gettop(L), field, path: "\(path).\(key)") { return d }
        }
        return nil
    }
}

/// Whether Foundation read `value` as true or false rather than as a number.
private func isBoolean(_ value: Any) -> Bool {
    guard let n = value as? NSNumber else { return false }
    return value is Bool && String(cString: n.objCType) == "c"
}

private func oracle(_ data: Data) -> Any? {
    try? JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed])
}

@Suite struct JSONCorpusTests {
    @Test(.enabled(if: Corpora.tomlTest != nil, Comment(rawValue: Corpora.tomlTestMissing)))
    func everyCorpusDocument_decodes_andAgreesWithFoundation() throws {
        let json = LuaJSON()
        let documents = Corpora.jsonDocuments()
        #expect(documents.count >= 200, "found only \(documents.count) documents")
        for (name, data) in documents {
            let expected = try #require(oracle(data), "Foundation refuses \(name)")
            if let refusal = json.decode(Array(data)) {
                Issue.record("\(name): refused: \(refusal)")
            } else if let d = json.difference(at: 2, expected) {
                Issue.record("\(name): \(d)")
            }
            #expect(lua_gettop(json.L) == 3, "\(name): comparing left the stack unbalanced")
        }
        print("lifeline.json.decode: \(documents.count) toml-test documents read as Foundation reads them")
    }

    @Test func everyAcceptedCase_decodes_andAgreesWithFoundation() throws {
        let json = LuaJSON()
        let accepted = Corpora.jsonCases("accepted.txt")
        #expect(accepted.count >= 40)
        for (name, bytes) in accepted {
            let expected = try #require(oracle(Data(bytes)), "Foundation refuses \(name), so the case is wrong")
            if let refusal = json.decode(bytes) {
                Issue.record("\(name): refused: \(refusal)")
            } else if let d = json.difference(at: 2, expected) {
                Issue.record("\(name): \(d)")
            }
            #expect(lua_gettop(json.L) == 3, "\(name): comparing left the stack unbalanced")
        }
    }

    @Test func everyRefusedCase_isRefused_withItsPlace() {
        let json = LuaJSON()
        let refused = Corpora.jsonCases("refused.txt")
        #expect(refused.count >= 150)
        for (name, bytes) in refused {
            guard let refusal = json.decode(bytes) else {
                Issue.record("\(name): accepted")
                continue
            }
            #expect(refusal.contains(" at character "), "\(name): \(refusal)")
        }
        print("lifeline.json.decode: \(refused.count) invalid texts refused")
    }

    @Test func hundredThousandOpenArrays_areRefusedWithoutOverflowingTheStack() {
        #expect(LuaJSON().decode(Array(repeating: UInt8(ascii: "["), count: 100_000)) != nil)
    }
}
