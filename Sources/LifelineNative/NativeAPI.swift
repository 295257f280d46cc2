import CLifelinePlugin
import Foundation
import Lifeline
import Logging

/// Why a call of the api failed: its status and the message `last_error` returns.
struct NativeError: Error {
    var status: Int
    var message: String
    init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
    static func notRunning(_ what: String) -> NativeError { NativeError(LIFELINE_ERR_NOT_RUNNING, "\(what): the app is not running this plugin") }
}

/// The table of host functions a native plugin gets (`lifeline_api`), each mapped onto the
/// plugin's `PluginContext` as the Swift plugin API is.
enum NativeAPI {
    /// The one table, for every plugin and launch: its functions find the launch through the handle.
    // Written once, then only read: by plugins, from any thread.
    nonisolated(unsafe) static let table: UnsafePointer<lifeline_api> = {
        let table = UnsafeMutablePointer<lifeline_api>.allocate(capacity: 1)
        table.initialize(to: make())
        return UnsafePointer(table)
    }()

    /// Runs an api call: only on a thread the host is running this plugin's code on, with this
    /// launch's handle. Anything else fails before any host state is touched.
    static func call(
        _ token: OpaquePointer?, _ name: String, _ body: (NativeHandle, PluginContext) throws(NativeError) -> Void
    ) -> Int32 {
        let thread = NativeThread.state
        guard let handle = thread.current else {
            thread.setError(
                "\(name): called outside the host's call into the plugin: from a thread of the plugin's own, or "
                    + "after its code returned. Call the api only from init and callbacks, on the thread that called them")
            return Int32(LIFELINE_ERR_THREAD)
        }
        guard let token else {
            thread.setError("\(name): the handle is NULL; use the handle init or the callback was given")
            return Int32(LIFELINE_ERR_ARGUMENT)
        }
        guard handle.token == token else {
            thread.setError(
                "\(name): the handle is not the one the host passed to the code running now (it belongs to an ended launch, "
                    + "or to another plugin); use the handle init or the callback was given")
            return Int32(LIFELINE_ERR_NOT_RUNNING)
        }
        guard let context = handle.context, context.isCurrent else {
            thread.setError("\(name): the app is not running this plugin")
            return Int32(LIFELINE_ERR_NOT_RUNNING)
        }
        do throws(NativeError) {
            try body(handle, context)
            return Int32(LIFELINE_OK)
        } catch {
            thread.setError("\(name): \(error.message)")
            return Int32(error.status)
        }
    }

    /// Hands bytes out in the thread's buffer, NUL-terminated (the NUL is not counted).
    static func handOut(_ bytes: some Collection<UInt8>, _ pointer: UnsafeMutablePointer<UnsafePointer<CChar>?>?,
                        _ length: UnsafeMutablePointer<Int>?) {
        let thread = NativeThread.state
        thread.out.set(bytes)
        thread.out.hand(pointer, length)
    }

    static func text(_ pointer: UnsafePointer<CChar>?, _ length: Int, _ what: String) throws(NativeError) -> String {
        guard let text = CBytes.text(pointer, length) else {
            if pointer == nil || length < 0 { throw NativeError(LIFELINE_ERR_ARGUMENT, CBytes.problem(pointer, length, what)) }
            throw NativeError(LIFELINE_ERR_ARGUMENT, "\(what) must be valid UTF-8")
        }
        return text
    }

    // MARK: - The table

    private static func make() -> lifeline_api {
        var api = lifeline_api()
        api.version = UInt32(LIFELINE_PLUGIN_API_VERSION)
        api.size = UInt32(MemoryLayout<lifeline_api>.size)
        api.last_error = { _, length in
            let thread = NativeThread.state
            length?.pointee = thread.error.count
            return UnsafePointer(thread.error.pointer)
        }
        api.fail = { token, message, length in
            NativeAPI.call(token, "fail") { handle, _ throws(NativeError) in
                handle.failMessage = String(decoding: try NativeAPI.bytes(message, length, "the message"), as: UTF8.self)
            }
        }
        api.subscribe = { token, event, length, handler, user, subscription in
            NativeAPI.call(token, "subscribe") { handle, context throws(NativeError) in
                let name = try NativeAPI.text(event, length, "the event's name")
                guard let eventName = LifecycleEventName(rawValue: name) else {
                    let names = LifecycleEventName.allCases.map(\.rawValue).joined(separator: ", ")
                    throw NativeError(LIFELINE_ERR_ARGUMENT, "no event named '\(name)'; the events are \(names)")
                }
                guard let handler else { throw NativeError(LIFELINE_ERR_ARGUMENT, "the handler is NULL") }
                if context.isUnloading { throw NativeError(LIFELINE_ERR_NOT_RUNNING, PluginContext.unloadingMessage) }
                let id = context.subscribe(eventName) { [weak handle] event in
                    guard let handle else { return .returned }
                    return handle.invoke("the \(event.name.rawValue) handler") { NativeAPI.deliver(event, to: handler, handle, user) }
                }
                guard id > 0 else { throw .notRunning("subscribe") }
                subscription?.pointee = UInt64(id)
            }
        }
        api.unsubscribe = { token, subscription in
            NativeAPI.call(token, "unsubscribe") { _, context throws(NativeError) in
                context.cancelSubscription(try NativeAPI.id(subscription, "subscription"))
            }
        }
        api.begin_task = { token, name, length, expired, user, task in
            NativeAPI.call(token, "begin_task") { handle, context throws(NativeError) in
                let name = length == 0 ? nil : try NativeAPI.text(name, length, "the task's name")
                var expiration: PluginCallback?
                if let expired {
                    expiration = { [weak handle] in
                        guard let handle else { return .returned }
                        return handle.invoke("the expiration handler") { expired(handle.token, user) }
                    }
                }
                if context.isUnloading { throw NativeError(LIFELINE_ERR_NOT_RUNNING, PluginContext.unloadingMessage) }
                let id = context.beginBackgroundTask(name: name, expirationHandler: expiration)
                guard id > 0 else { throw NativeError(LIFELINE_ERR_REFUSED, "the task could not begin: the app is not running it") }
                task?.pointee = UInt64(id)
            }
        }
        api.end_task = { token, task in
            NativeAPI.call(token, "end_task") { _, context throws(NativeError) in
                guard context.endBackgroundTask(try NativeAPI.id(task, "task")) else {
                    throw NativeError(LIFELINE_ERR_NOT_FOUND, "background task \(task) is unknown or has ended")
                }
            }
        }
        api.time_remaining = { token, seconds in
            NativeAPI.call(token, "time_remaining") { _, context in seconds?.pointee = context.backgroundTimeRemaining }
        }
        api.app_state = { token, state, length in
            NativeAPI.call(token, "app_state") { _, context in
                let thread = NativeThread.state
                thread.state.set(context.state.rawValue.utf8)
                thread.state.hand(state, length)
            }
        }
        api.now = { token, seconds in
            NativeAPI.call(token, "now") { _, context in seconds?.pointee = context.now }
        }
        api.after = { token, seconds, callback, user, timer in
            NativeAPI.call(token, "after") { handle, context throws(NativeError) in
                guard seconds.isFinite, seconds >= 0 else {
                    throw NativeError(LIFELINE_ERR_ARGUMENT, "the delay must be a finite number of seconds, 0 or more")
                }
                guard let callback else { throw NativeError(LIFELINE_ERR_ARGUMENT, "the callback is NULL") }
                if context.isUnloading { throw NativeError(LIFELINE_ERR_NOT_RUNNING, PluginContext.unloadingMessage) }
                let id = context.startTimer(after: seconds) { [weak handle] in
                    guard let handle else { return .returned }
                    return handle.invoke("the timer") { callback(handle.token, user) }
                }
                guard id > 0 else { throw .notRunning("after") }
                timer?.pointee = UInt64(id)
            }
        }
        api.cancel_timer = { token, timer in
            NativeAPI.call(token, "cancel_timer") { _, context throws(NativeError) in context.cancelTimer(try NativeAPI.id(timer, "timer")) }
        }
        api.log = { token, level, message, length in
            NativeAPI.call(token, "log") { _, context throws(NativeError) in
                let levels: [Logger.Level] = [.debug, .info, .warning, .error]
                guard levels.indices.contains(Int(level)) else {
                    throw NativeError(LIFELINE_ERR_ARGUMENT, "no log level \(level); use LIFELINE_LOG_DEBUG … LIFELINE_LOG_ERROR")
                }
                // Any bytes: NULs are kept, and bytes that are not UTF-8 become U+FFFD, as a report holds text.
                let line = String(decoding: try NativeAPI.bytes(message, length, "the message"), as: UTF8.self)
                context.logger.log(level: levels[Int(level)], "\(line)")
            }
        }
        NativeAPI.storeAndFiles(&api)
        NativeAPI.systemTasks(&api)
        return api
    }

    /// The id a C caller passes, as the host's Int.
    static func id(_ value: UInt64, _ what: String) throws(NativeError) -> Int {
        guard value > 0, value <= UInt64(Int.max) else { throw NativeError(LIFELINE_ERR_NOT_FOUND, "no \(what) \(value)") }
        return Int(value)
    }

    static func bytes(_ pointer: UnsafePointer<CChar>?, _ length: Int, _ what: String) throws(NativeError) -> UnsafeRawBufferPointer {
        guard let buffer = CBytes.buffer(pointer, length) else {
            throw NativeError(LIFELINE_ERR_ARGUMENT, CBytes.problem(pointer, length, what))
        }
        return buffer
    }

    /// Calls a subscriber with the event, its strings alive for the call.
    private static func deliver(
        _ event: LifecycleEvent, to handler: lifeline_event_fn, _ handle: NativeHandle, _ user: UnsafeMutableRawPointer?
    ) -> Int32 {
        let name = Array(event.name.rawValue.utf8CString)
        let state = Array(event.state.rawValue.utf8CString)
        let payload = event.payload.map { Array($0.utf8CString) }
        return name.withUnsafeBufferPointer { name in
            state.withUnsafeBufferPointer { state in
                func send(_ payload: UnsafeBufferPointer<CChar>?) -> Int32 {
                    var e = lifeline_event(
                        name: name.baseAddress, name_len: name.count - 1, time: event.time, state: state.baseAddress,
                        state_len: state.count - 1, completion: UInt64(event.completion ?? 0),
                        payload: payload?.baseAddress, payload_len: payload.map { $0.count - 1 } ?? 0)
                    return handler(handle.token, &e, user)
                }
                guard let payload else { return send(nil) }
                return payload.withUnsafeBufferPointer { send($0) }
            }
        }
    }
}
