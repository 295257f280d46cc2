// The annotation table of the `lifeline` module: each function's parameters, results and one-line
// doc, in LuaLS's type syntax. The generator (EditorFilesGenerator) writes the editor files from
// it, but only for what the live module has (ModuleWalk): an entry the module lacks, or a
// function of the module with no entry here, stops the generator and names it. So this table is
// where a new function of the module gets its stub. The words follow docs/lua-api.md.

/// A function, a method or a handed table's function field.
struct LuaFunction {
    /// "lifeline.on", "lifeline.store.get"; a class's method "lifeline.Queue:add".
    var path: String
    var doc: String
    var params: [LuaParam] = []
    var returns: [LuaReturn] = []
    /// Other signatures, as LuaLS `fun(...)` types.
    var overloads: [String] = []
    /// A waiting call: only inside a function `lifeline.background` or a queue runs.
    var async = false
    /// Called with a dot (`event.complete(result)`), not as a method: a function stored in each
    /// new table the module hands out.
    var dot = false
}

/// A parameter: `name?` is optional, `...` the rest.
struct LuaParam {
    var name: String
    var type: String
    var doc: String = ""
}

struct LuaReturn {
    var type: String
    var name: String = ""
    var doc: String = ""
}

/// A class of values: objects the module hands out, and the tables it takes or returns.
struct LuaClass {
    var name: String
    var doc: String
    var fields: [LuaField] = []
}

/// A field: `name?` is optional.
struct LuaField {
    var name: String
    var type: String
    var doc: String = ""
}

/// A table of the module (`lifeline.store`), typed by a class of its own; `callable` is the
/// signature of a table that can be called (`lifeline.queue(name)`).
struct LuaTable {
    var path: String
    var cls: String
    var doc: String
    var callable: String? = nil
}

/// A member of the module that is not a function or a table of functions.
struct LuaValue {
    var path: String
    var type: String
    var doc: String
}

/// A type alias: a union of string literals (`cases`) or a plain type.
struct LuaAlias {
    var name: String
    var doc: String
    var cases: [(value: String, doc: String)] = []
    var type: String? = nil
}

private func p(_ name: String, _ type: String, _ doc: String = "") -> LuaParam { LuaParam(name: name, type: type, doc: doc) }
private func r(_ type: String, _ name: String = "", _ doc: String = "") -> LuaReturn {
    LuaReturn(type: type, name: name, doc: doc)
}
private func f(_ name: String, _ type: String, _ doc: String = "") -> LuaField { LuaField(name: name, type: type, doc: doc) }

enum LuaAPI {
    /// One line for each event of `LifecycleEventName`; the generator takes the names from the
    /// enum itself and stops on a name with no line here.
    static let eventDocs: [String: String] = [
        "didFinishLaunching": "the app has launched",
        "didBecomeActive": "the app is in the foreground and active",
        "willResignActive": "the app is about to become inactive",
        "didEnterBackground": "the app is in the background: its budget is running",
        "willEnterForeground": "the app is about to come back to the foreground",
        "willTerminate": "the app is about to end (never sent to a suspended app)",
        "didReceiveMemoryWarning": "the system is low on memory",
        "transferProgress": "a transfer's bytes so far: `event.id`, `event.received`, `event.total`",
        "transferDidFinish": "a transfer is complete, verified and under its final name: `event.id`",
        "transferDidFail": "a transfer failed or was cancelled: `event.id`, `event.reason`",
        "didFinishTransferEvents": "every waiting transfer event was delivered: call `event.complete()`",
        "performFetch": "the system asks the app to fetch: call `event.complete(result)`",
        "didReceiveRemoteNotification": "a silent push: `event.payload`; call `event.complete(result)`",
        "willUnload": "a reload ends this plugin's generation: its last word; no new work may start",
    ]

    static let aliases: [LuaAlias] = [
        LuaAlias(
            name: "lifeline.AppState", doc: "The app's state while plugin code runs.",
            cases: [
                ("inactive", "in the foreground, not receiving events"), ("active", "in the foreground"),
                ("background", "in the background: the budget is running"),
            ]),
        LuaAlias(
            name: "lifeline.FetchResult", doc: "What a fetch or a silent push brought.",
            cases: [("newData", "new data arrived"), ("noData", "nothing new"), ("failed", "the attempt failed")]),
        LuaAlias(
            name: "lifeline.StoreValue",
            doc: "What the store keeps: strings (UTF-8), numbers, booleans, and arrays or string-keyed tables of them.",
            type: "string|number|boolean|table"),
        LuaAlias(
            name: "lifeline.OperationSpec", doc: "An operation for a queue: a function, or a table that says more.",
            type: "(async fun(op: lifeline.Operation))|lifeline.OperationOptions"),
        LuaAlias(
            name: "lifeline.TaskKind", doc: "The kind of a scheduled task request.",
            cases: [("refresh", "a short refresh (BGAppRefreshTask)"), ("processing", "a long maintenance task (BGProcessingTask)")]),
    ]

    static let classes: [LuaClass] = [
        LuaClass(
            name: "lifeline.Handle",
            doc: "What `lifeline.on` and `lifeline.after` return: `:cancel()` unsubscribes or stops the timer."),
        LuaClass(
            name: "lifeline.Event",
            doc: "The table a handler of `lifeline.on` gets.",
            fields: [
                f("name", "lifeline.EventName", "the notification's name"),
                f("time", "number", "seconds since the host started, on the host's clock"),
                f("state", "lifeline.AppState", "the app's state while the handlers run"),
                f("id?", "string", "the transfer's id (transfer events)"),
                f("reason?", "string", "why the transfer failed (`transferDidFail`)"),
                f("received?", "integer", "bytes so far (`transferProgress`)"),
                f("total?", "integer", "bytes in all, when known (`transferProgress`)"),
                f("payload?", "table", "the push's JSON object (`didReceiveRemoteNotification`)"),
            ]),
        LuaClass(
            name: "lifeline.Profile",
            doc: "The figures in force (`lifeline.profile()`), command-line flags included; times in seconds.",
            fields: [
                f("name", "string", "the profile's name, as `\"ios13\"`"),
                f("budget", "number", "the background budget"),
                f("expirationLead", "number", "how long before the budget's end the expiration handlers run"),
                f("launchLimit", "number", "the watchdog's limit for launch"),
                f("backgroundLimit", "number", "the watchdog's limit for `didEnterBackground`"),
                f("transitionLimit", "number", "the watchdog's limit for other transitions, timers and work slices"),
                f("terminateLimit", "number", "the watchdog's limit for `willTerminate`"),
                f("expirationHandlerLimit", "number", "the limit of each expiration handler"),
                f("taskLimit", "integer", "how many background tasks may be active at once"),
            ]),
        LuaClass(
            name: "lifeline.Work",
            doc: "The handle of a `lifeline.background` work: its background task's `id`, and its methods.",
            fields: [f("id", "integer", "the background task's id")]),
        LuaClass(
            name: "lifeline.WorkOptions", doc: "The first argument of `lifeline.background` as a table.",
            fields: [
                f("name?", "string", "the task's name in the timeline"),
                f("task?", "integer", "a background task the plugin already holds: the work runs under it, and ends none"),
            ]),
        LuaClass(
            name: "lifeline.Error",
            doc: "The error value of waits and requests; `tostring(err)` is its message.",
            fields: [
                f("kind", "string", "`expired`, `cancelled`, `error`, or a request's `timeout`, `connect`, `tls`, `tooLarge`, `notPermitted`, `redirect`"),
                f("message", "string", "what happened"),
                f("expired?", "true", "the task expired"),
                f("cancelled?", "true", "the work was cancelled"),
            ]),
        LuaClass(
            name: "lifeline.HTTPRequest", doc: "The table `lifeline.http.request` takes.",
            fields: [
                f("url", "string", "`http://` or `https://`; the host must be listed in plugin.toml's `[permissions] network`"),
                f("method?", "string", "`\"GET\"` by default"),
                f("headers?", "table<string, string>", "header names to values"),
                f("body?", "string", "the request's body"),
                f("timeout?", "number", "seconds, > 0; 60 by default"),
            ]),
        LuaClass(
            name: "lifeline.HTTPResponse", doc: "The answer of `lifeline.http.request`.",
            fields: [
                f("status", "integer", "the HTTP status"),
                f("headers", "table<string, string>", "lowercased names; repeated headers joined with `\", \"`"),
                f("body", "string", "the body"),
            ]),
        LuaClass(
            name: "lifeline.QueueOptions", doc: "The options of `lifeline.queue`.",
            fields: [f("maxConcurrent?", "integer", "how many operations run at once, >= 1; 1 by default")]),
        LuaClass(
            name: "lifeline.Queue", doc: "An operation queue (`lifeline.queue`), shared by name by every plugin of the host.",
            fields: [f("name", "string", "the queue's name")]),
        LuaClass(
            name: "lifeline.OperationOptions", doc: "An operation for `q:add` as a table.",
            fields: [
                f("run", "async fun(op: lifeline.Operation)", "what the operation does, in a coroutine the host runs"),
                f("async?", "boolean", "`true`: it finishes at `op:finish()`, not when `run` returns"),
                f("name?", "string", "shown in the report, and used by `unique`"),
                f("unique?", "\"ignore\"|\"drop\"|\"replace\"", "what to do when an operation of this name is pending or running"),
                f("timeout?", "number", "seconds from its start, > 0; 10 by default, `math.huge` for none"),
                f("onTimeout?", "fun(op: lifeline.Operation)", "called when the timeout passes"),
            ]),
        LuaClass(
            name: "lifeline.Operation", doc: "An operation's handle (`q:add`); it keeps answering after the operation finished.",
            fields: [f("id", "integer", "unique for the host's life"), f("name", "string?", "its name, or nil")]),
        LuaClass(
            name: "lifeline.Transfer", doc: "A background transfer, as `lifeline.transfers.list()` gives it.",
            fields: [
                f("id", "string", "the transfer's id"), f("kind", "\"download\"|\"upload\""), f("url", "string"),
                f("file", "string", "the file, relative to the plugin's files folder"),
                f("state", "\"queued\"|\"running\"|\"finished\"|\"failed\"|\"cancelled\""),
                f("received", "integer", "bytes so far"), f("total?", "integer", "bytes in all, when known"),
                f("reason?", "string", "why it failed"),
            ]),
        LuaClass(
            name: "lifeline.DownloadRequest", doc: "The table `lifeline.transfers.download` takes.",
            fields: [
                f("url", "string", "http or https; the host must be permitted"),
                f("to", "string", "the file to write, relative to the plugin's files folder"),
                f("sha256?", "string", "64 hex digits, checked before the file gets its name"),
                f("id?", "string", "the transfer's id; asking again with it returns the unfinished one"),
            ]),
        LuaClass(
            name: "lifeline.UploadRequest", doc: "The table `lifeline.transfers.upload` takes.",
            fields: [
                f("url", "string", "http or https; the host must be permitted"),
                f("from", "string", "the file to send, relative to the plugin's files folder"),
                f("method?", "\"PUT\"|\"POST\"", "`\"PUT\"` by default"),
                f("id?", "string", "the transfer's id"),
            ]),
        LuaClass(
            name: "lifeline.TaskRequest",
            doc: "A scheduled task request: what `lifeline.tasks.submit` takes and `lifeline.tasks.pending()` lists.",
            fields: [
                f("identifier", "string", "listed in plugin.toml's `[background] identifiers`"),
                f("kind", "lifeline.TaskKind"),
                f("earliestBegin?", "number", "seconds from now (submit; 0 by default), or on `lifeline.now()`'s clock (pending)"),
                f("requiresNetwork?", "boolean", "false by default"),
                f("requiresPower?", "boolean", "false by default"),
            ]),
        LuaClass(
            name: "lifeline.ScheduledTask",
            doc: "The task a handler of `lifeline.tasks.register` gets; complete it before its time runs out.",
            fields: [
                f("id", "integer"), f("identifier", "string"), f("kind", "lifeline.TaskKind"),
                f("expirationHandler?", "fun()", "set it: called shortly before the task's time runs out"),
            ]),
    ]

    /// The module's tables, in the order the stub gives them.
    static let tables: [LuaTable] = [
        LuaTable(path: "lifeline", cls: "lifelinelib", doc: "The Lifeline host's API for plugins: a global, and `require(\"lifeline\")`."),
        LuaTable(path: "lifeline.log", cls: "lifeline.loglib", doc: "The host log, tagged with the plugin's name."),
        LuaTable(path: "lifeline.http", cls: "lifeline.httplib", doc: "HTTP requests, from inside `lifeline.background`."),
        LuaTable(path: "lifeline.json", cls: "lifeline.jsonlib", doc: "A JSON codec whose memory counts against the plugin's cap."),
        LuaTable(
            path: "lifeline.queue", cls: "lifeline.queuelib",
            doc: "`lifeline.queue(name, [options])` makes or gets an operation queue.",
            callable: "fun(name: string, options?: lifeline.QueueOptions): lifeline.Queue"),
        LuaTable(path: "lifeline.store", cls: "lifeline.storelib", doc: "The plugin's durable key-value store."),
        LuaTable(path: "lifeline.files", cls: "lifeline.fileslib", doc: "The plugin's own files folder (the sandbox has no `io`)."),
        LuaTable(path: "lifeline.transfers", cls: "lifeline.transferslib", doc: "Background transfers the host owns."),
        LuaTable(path: "lifeline.tasks", cls: "lifeline.taskslib", doc: "Work the system runs later, as BGTaskScheduler does."),
    ]

    static let values: [LuaValue] = [
        LuaValue(path: "lifeline.config", type: "table<string, any>", doc: "plugin.toml's `[config]` table."),
        LuaValue(path: "lifeline.json.null", type: "lightuserdata", doc: "The value JSON `null` decodes to and encodes from."),
        LuaValue(
            path: "lifeline.queue.background", type: "lifeline.Queue",
            doc: "The global queue: up to 4 operations at once; `lifeline.queue(\"background\")` is the same queue."),
    ]

    static let functions: [LuaFunction] = [
        // lifeline
        LuaFunction(
            path: "lifeline.on",
            doc: "Subscribes `fn` to a lifecycle notification; an unknown name is an error that lists the valid ones.",
            params: [p("event", "lifeline.EventName"), p("fn", "fun(event: lifeline.Event)", "called with the event's table")],
            returns: [r("lifeline.Handle", "handle", "`handle:cancel()` unsubscribes")]),
        LuaFunction(
            path: "lifeline.beginBackgroundTask",
            doc: "Begins a background task; end it on every path with `lifeline.endBackgroundTask(id)`.",
            params: [
                p("name?", "string", "the task's name in the timeline"),
                p("onExpire?", "fun()", "called at the expiration moment; it should end the task"),
            ],
            returns: [r("integer", "id", "the task's id, > 0 (0 when the task limit is passed)")],
            overloads: ["fun(onExpire: fun()): integer"]),
        LuaFunction(
            path: "lifeline.endBackgroundTask",
            doc: "Ends a task: `true`, or `false` for an id that is unknown or already ended (harmless).",
            params: [p("id", "integer")], returns: [r("boolean", "ended")]),
        LuaFunction(
            path: "lifeline.backgroundTimeRemaining",
            doc: "Seconds left of the app's background budget; `math.huge` in the foreground.",
            returns: [r("number", "seconds")]),
        LuaFunction(path: "lifeline.state", doc: "The app's state now.", returns: [r("lifeline.AppState")]),
        LuaFunction(
            path: "lifeline.now", doc: "Seconds since the host started, on the host's clock (virtual in `simulate`).",
            returns: [r("number", "seconds")]),
        LuaFunction(
            path: "lifeline.profile", doc: "A new table of the profile's figures in force.", returns: [r("lifeline.Profile")]),
        LuaFunction(
            path: "lifeline.after", doc: "A one-shot timer: calls `fn` `seconds` from now.",
            params: [p("seconds", "number", "finite, >= 0; the resolution is 1 ms"), p("fn", "fun()")],
            returns: [r("lifeline.Handle", "handle", "`handle:cancel()` stops it")]),
        LuaFunction(
            path: "lifeline.background",
            doc: "Begins a background task and runs `fn(task, ...)` in a coroutine the host owns, from the next turn; the task ends on every path.",
            params: [
                p("name", "string|lifeline.WorkOptions|nil", "the task's name, or `{task = id, name = ...}` to run under a task you hold"),
                p("fn", "async fun(task: lifeline.Work, ...: any): any", "the work; it may wait; `task:wait()` answers what it returns"),
                p("...", "any", "passed to `fn` after the handle"),
            ],
            returns: [r("lifeline.Work", "task")]),
        LuaFunction(
            path: "lifeline.sleep", doc: "Waits `seconds` on the host's clock.",
            params: [p("seconds", "number", "finite, >= 0")], async: true),
        // lifeline.log
        LuaFunction(path: "lifeline.log.debug", doc: "Writes one line at `debug` to the host log.", params: [p("...", "any")]),
        LuaFunction(path: "lifeline.log.info", doc: "Writes one line at `info` to the host log (as `print` does).", params: [p("...", "any")]),
        LuaFunction(path: "lifeline.log.warning", doc: "Writes one line at `warning` to the host log.", params: [p("...", "any")]),
        LuaFunction(path: "lifeline.log.error", doc: "Writes one line at `error` to the host log.", params: [p("...", "any")]),
        // lifeline.http
        LuaFunction(
            path: "lifeline.http.request", doc: "Makes an HTTP request and waits for its answer.",
            params: [p("request", "lifeline.HTTPRequest")],
            returns: [r("lifeline.HTTPResponse?", "response"), r("lifeline.Error?", "err", "when the request failed")],
            async: true),
        // lifeline.json
        LuaFunction(
            path: "lifeline.json.encode", doc: "Encodes a value as JSON, with object keys in byte order.",
            params: [p("value", "any")], returns: [r("string?", "text"), r("string?", "message", "why it cannot be encoded")]),
        LuaFunction(
            path: "lifeline.json.decode", doc: "Decodes JSON text; `null` becomes `lifeline.json.null`.",
            params: [p("text", "string")], returns: [r("any", "value"), r("string?", "message", "why it is not JSON")]),
        // lifeline.store
        LuaFunction(
            path: "lifeline.store.get", doc: "The value stored under `key`, or nil.",
            params: [p("key", "string")], returns: [r("lifeline.StoreValue?")]),
        LuaFunction(
            path: "lifeline.store.set", doc: "Stores `value` under `key`; raises over the quota.",
            params: [p("key", "string", "non-empty UTF-8, at most 1024 bytes"), p("value", "lifeline.StoreValue")]),
        LuaFunction(
            path: "lifeline.store.delete", doc: "Removes `key`: whether it was there.",
            params: [p("key", "string")], returns: [r("boolean")]),
        LuaFunction(
            path: "lifeline.store.keys", doc: "The keys that start with `prefix`, in byte order.",
            params: [p("prefix?", "string")], returns: [r("string[]")]),
        LuaFunction(
            path: "lifeline.store.transaction",
            doc: "Runs `fn`: its changes are written together when it returns, or not at all when it raises; it may not wait.",
            params: [p("fn", "fun()")]),
        // lifeline.files
        LuaFunction(
            path: "lifeline.files.write", doc: "Writes a file, atomically; folders on the way are made.",
            params: [p("name", "string", "relative to the plugin's files folder"), p("data", "string")]),
        LuaFunction(
            path: "lifeline.files.read", doc: "A file's bytes; nil and a message when there is no such file.",
            params: [p("name", "string")], returns: [r("string?", "data"), r("string?", "message")]),
        LuaFunction(
            path: "lifeline.files.remove", doc: "Removes a file or an empty folder: whether there was one.",
            params: [p("name", "string")], returns: [r("boolean")]),
        LuaFunction(
            path: "lifeline.files.list", doc: "The names of the plugin's files, in byte order.", returns: [r("string[]")]),
        LuaFunction(
            path: "lifeline.files.size", doc: "A file's size in bytes, or nil when there is no such file.",
            params: [p("name", "string")], returns: [r("integer?")]),
        // lifeline.transfers
        LuaFunction(
            path: "lifeline.transfers.download", doc: "Starts a download the host owns; it goes on while the app is suspended.",
            params: [p("request", "lifeline.DownloadRequest")], returns: [r("string", "id")]),
        LuaFunction(
            path: "lifeline.transfers.upload", doc: "Starts an upload the host owns.",
            params: [p("request", "lifeline.UploadRequest")], returns: [r("string", "id")]),
        LuaFunction(
            path: "lifeline.transfers.list", doc: "The plugin's transfers, oldest first.", returns: [r("lifeline.Transfer[]")]),
        LuaFunction(
            path: "lifeline.transfers.cancel", doc: "Cancels an unfinished transfer: whether there was one.",
            params: [p("id", "string")], returns: [r("boolean")]),
        // lifeline.tasks
        LuaFunction(
            path: "lifeline.tasks.register",
            doc: "While the plugin loads: `fn(task)` runs each time the system runs a request for `identifier`.",
            params: [p("identifier", "string", "listed in plugin.toml's `[background] identifiers`"), p("fn", "fun(task: lifeline.ScheduledTask)")]),
        LuaFunction(
            path: "lifeline.tasks.submit", doc: "Asks the system for a run; replaces a pending request of the same identifier.",
            params: [p("request", "lifeline.TaskRequest")]),
        LuaFunction(
            path: "lifeline.tasks.cancel", doc: "Cancels a pending request: whether one was pending.",
            params: [p("identifier", "string")], returns: [r("boolean")]),
        LuaFunction(
            path: "lifeline.tasks.pending", doc: "The plugin's pending requests.", returns: [r("lifeline.TaskRequest[]")]),
        // Handles
        LuaFunction(path: "lifeline.Handle:cancel", doc: "Unsubscribes, or stops the timer; harmless when repeated."),
        // Events
        LuaFunction(
            path: "lifeline.Event:complete",
            doc: "`performFetch`, `didReceiveRemoteNotification` and `didFinishTransferEvents`: the completion to call once; `false` when called already or late.",
            params: [p("result?", "lifeline.FetchResult", "none for `didFinishTransferEvents`")],
            returns: [r("boolean")],
            // event:complete(result) works too: the host skips the table when it comes first.
            overloads: ["fun(self: lifeline.Event, result?: lifeline.FetchResult): boolean"], dot: true),
        // Works
        LuaFunction(path: "lifeline.Work:cancel", doc: "Cancels the work (harmless once it is done)."),
        LuaFunction(path: "lifeline.Work:done", doc: "Whether the work has finished.", returns: [r("boolean")]),
        LuaFunction(
            path: "lifeline.Work:wait",
            doc: "Waits for the work: `true` and `fn`'s values, or `false` and the error.",
            returns: [r("boolean", "ok"), r("any", "...", "`fn`'s values, or a `lifeline.Error`")], async: true),
        // Queues
        LuaFunction(
            path: "lifeline.Queue:add", doc: "Adds an operation: its handle, or nil when `unique = \"drop\"` dropped it.",
            params: [p("operation", "lifeline.OperationSpec")], returns: [r("lifeline.Operation?")]),
        LuaFunction(
            path: "lifeline.Queue:addSequential", doc: "Adds operations that run one after another: their handles.",
            params: [
                p("list", "lifeline.OperationSpec[]"),
                p("options?", "{wait?: boolean}", "`wait = true` waits until the last one finished"),
            ],
            returns: [r("lifeline.Operation[]")]),
        LuaFunction(path: "lifeline.Queue:suspend", doc: "Starts nothing more until `resume`; calls are counted."),
        LuaFunction(
            path: "lifeline.Queue:resume", doc: "Undoes one `suspend`: `false` when the queue was not suspended.",
            returns: [r("boolean")]),
        LuaFunction(path: "lifeline.Queue:cancelAll", doc: "Cancels every pending and running operation."),
        LuaFunction(
            path: "lifeline.Queue:on", doc: "Calls `fn` when the queue starts working, or when it drained.",
            params: [p("event", "\"willStartOperations\"|\"didFinishOperations\""), p("fn", "fun()")]),
        LuaFunction(path: "lifeline.Queue:count", doc: "Pending and running operations.", returns: [r("integer")]),
        LuaFunction(path: "lifeline.Queue:isSuspended", doc: "Whether the queue is suspended.", returns: [r("boolean")]),
        // Operations
        LuaFunction(
            path: "lifeline.Operation:finish", doc: "Finishes the operation: `false` when it had finished.",
            returns: [r("boolean")]),
        LuaFunction(
            path: "lifeline.Operation:cancel",
            doc: "A pending operation finishes without running; a running one's waiting call raises `cancelled`."),
        LuaFunction(
            path: "lifeline.Operation:isCancelled", doc: "Whether it was cancelled, timed out or expired.",
            returns: [r("boolean")]),
        LuaFunction(path: "lifeline.Operation:isFinished", doc: "Whether it finished.", returns: [r("boolean")]),
        LuaFunction(
            path: "lifeline.Operation:wait", doc: "Waits until the operation finished.",
            returns: [
                r("boolean", "ok"), r("(\"cancelled\"|\"timedOut\"|\"expired\"|\"failed\")?", "why", "how it ended when not ok"),
            ],
            async: true),
        // Scheduled tasks
        LuaFunction(
            path: "lifeline.ScheduledTask:setTaskCompleted",
            doc: "Completes the task: `false` when called already or late.",
            params: [p("success", "boolean")], returns: [r("boolean")]),
    ]
}
