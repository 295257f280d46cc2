import CLua
import CLuaShims
import Lifeline

/// `lifeline.http.request`: a waiting call, answered by the host's HTTP transport.
extension LuaModule {
    static let httpFunctions: [(String, lifeline_bridged)] = [("http.request", httpRequest)]

    /// lifeline.http.request{method, url, headers, body, timeout} -> response | nil, err
    static let httpRequest: lifeline_bridged = { L in
        guard let L else { return 0 }
        let fname = "lifeline.http.request"
        if let refused = LuaModule.refuseWhileUnloading(L, fname) { return refused }
        guard lua_type(L, 1) == LUA_TTABLE else { return typeError(L, 1, fname, "table") }
        // Raw reads only: a metamethod could raise through this Swift frame.
        func field(_ key: String) -> Int32 {
            push(L, key)
            return lua_rawget(L, 1)
        }
        guard field("url") == LUA_TSTRING, let url = text(L, -1), HTTPURL(url) != nil else {
            return argError(L, 1, fname, "field 'url' must be an absolute http:// or https:// URL")
        }
        lifeline_pop(L, 1)
        var method = "GET"
        switch field("method") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            method = string(L, -1).uppercased()
            guard !method.isEmpty, method.utf8.allSatisfy({ $0 >= 0x41 && $0 <= 0x5A || $0 == 0x2D }) else {
                return argError(L, 1, fname, "field 'method' must be an HTTP method such as GET or POST")
            }
        default: return argError(L, 1, fname, "field 'method' must be a string")
        }
        lifeline_pop(L, 1)
        var body: [UInt8] = []
        switch field("body") {
        case LUA_TNIL: break
        case LUA_TSTRING:
            var length = 0
            if let p = lua_tolstring(L, -1, &length) {
                body = Array(UnsafeRawBufferPointer(start: p, count: length))
            }
        default: return argError(L, 1, fname, "field 'body' must be a string")
        }
        lifeline_pop(L, 1)
        var timeout = HTTPRequest.defaultTimeout
        switch field("timeout") {
        case LUA_TNIL: break
        case LUA_TNUMBER:
            timeout = lua_tonumberx(L, -1, nil)
            guard timeout.isFinite, timeout > 0 else {
                return argError(L, 1, fname, "field 'timeout' must be a number of seconds > 0")
            }
        default: return argError(L, 1, fname, "field 'timeout' must be a number")
        }
        lifeline_pop(L, 1)
        var headers = HTTPFields()
        switch field("headers") {
        case LUA_TNIL: break
        case LUA_TTABLE:
            lua_pushnil(L)
            while lua_next(L, -2) != 0 {
                guard lua_type(L, -2) == LUA_TSTRING, lua_type(L, -1) == LUA_TSTRING, let name = text(L, -2),
                    let value = text(L, -1)
                else {
                    return argError(L, 1, fname, "field 'headers' must map header names to strings of UTF-8 text")
                }
                guard let fieldName = HTTPField.Name(name), HTTPField.isSendable(value: value) else {
                    return argError(
                        L, 1, fname,
                        "header '\(name)' is not a valid header line: a name is a token, and neither part may hold "
                            + "a NUL, CR or LF byte")
                }
                // Lenient: the value goes out byte for byte, as the plugin wrote it.
                headers.append(HTTPField(name: fieldName, lenientValue: value.utf8))
                lifeline_pop(L, 1)
            }
            // In name order, so the same plugin sends the same request on every run.
            headers.sort { $0.name.rawName < $1.name.rawName }
        default: return argError(L, 1, fname, "field 'headers' must be a table")
        }
        lifeline_pop(L, 1)
        guard let work = waitingWork(L, fname) else { return LIFELINE_RAISE }
        guard let (plugin, context) = context(L) else { return 0 }
        // The body the host sends is counted against the cap until the request ends. The response
        // is held twice while it is handed over (the host's copy, and the Lua string made from it),
        // so it may be no longer than half the room left under the cap.
        guard let bodyCharge = HostCharge(plugin, bytes: body.count),
            plugin.chargeEvents(2, text: 2 * (url.utf8.count + method.utf8.count))
        else { return LIFELINE_NOMEM }
        let room = plugin.memoryRoom / 2
        var request = HTTPRequest(method: method, url: url, headers: headers, body: body, timeout: timeout)
        let cappedByMemory = room < request.maximumBodyBytes
        request.maximumBodyBytes = min(request.maximumBodyBytes, room)
        // The request holds the work until it completes or is cancelled (see `sleep`).
        let waitID = context.http(request) { [work] result in
            withExtendedLifetime(bodyCharge) {}
            if cappedByMemory, case .failure(let failure) = result, failure.kind == .tooLarge {
                work.deliver(LuaBackgroundWork.outOfMemory)
                return
            }
            // The Lua values, and the host's copy of the body, alive beside them until the push ends.
            let size = (try? result.get()).map { r in 2 * r.body.count + r.headers.reduce(256) { $0 + 64 + $1.name.rawName.utf8.count + $1.value.utf8.count } } ?? 0
            work.deliver(LuaBackgroundWork.results(fitting: size) { L in pushResult(L, result) })
        }
        guard waitID != 0 else { return 0 }
        work.waiting(on: waitID)
        return LIFELINE_YIELD
    }

    /// `{status, headers, body}`, or `nil, err`. Header names are lowercased; repeated headers are
    /// joined with ", ".
    private static func pushResult(_ L: OpaquePointer, _ result: Result<HTTPResponse, HTTPFailure>) -> Int32 {
        switch result {
        case .success(let response):
            lua_createtable(L, 0, 3)
            lua_pushinteger(L, lua_Integer(response.status))
            lua_setfield(L, -2, "status")
            var merged: [(String, String)] = []
            for header in response.headers {
                let name = header.name.canonicalName
                if let i = merged.firstIndex(where: { $0.0 == name }) {
                    merged[i].1 += ", " + header.value
                } else {
                    merged.append((name, header.value))
                }
            }
            lua_createtable(L, 0, Int32(merged.count))
            for (name, value) in merged {
                push(L, value)
                setField(L, name)
            }
            lua_setfield(L, -2, "headers")
            response.body.withUnsafeBufferPointer { buffer in
                _ = buffer.baseAddress.map { p in
                    p.withMemoryRebound(to: CChar.self, capacity: buffer.count) { lua_pushlstring(L, $0, buffer.count) }
                } ?? lua_pushlstring(L, "", 0)
            }
            lua_setfield(L, -2, "body")
            return 1
        case .failure(let failure):
            lua_pushnil(L)
            lifeline_push_error(L, failure.kind.rawValue, failure.message)
            return 2
        }
    }
}
