---@meta lifeline
-- The `lifeline` module of Lifeline's Lua plugins, for LuaLS (lua-language-server):
-- completion, hover and type checks. See docs/lua-api.md and docs/editors.md.
-- Generated from the module itself by scripts/editor-files; do not edit.

---The notifications `lifeline.on` takes.
---@alias lifeline.EventName
---| "didFinishLaunching" # the app has launched
---| "didBecomeActive" # the app is in the foreground and active
---| "willResignActive" # the app is about to become inactive
---| "didEnterBackground" # the app is in the background: its budget is running
---| "willEnterForeground" # the app is about to come back to the foreground
---| "willTerminate" # the app is about to end (never sent to a suspended app)
---| "didReceiveMemoryWarning" # the system is low on memory
---| "transferProgress" # a transfer's bytes so far: `event.id`, `event.received`, `event.total`
---| "transferDidFinish" # a transfer is complete, verified and under its final name: `event.id`
---| "transferDidFail" # a transfer failed or was cancelled: `event.id`, `event.reason`
---| "didFinishTransferEvents" # every waiting transfer event was delivered: call `event.complete()`
---| "performFetch" # the system asks the app to fetch: call `event.complete(result)`
---| "didReceiveRemoteNotification" # a silent push: `event.payload`; call `event.complete(result)`
---| "willUnload" # a reload ends this plugin's generation: its last word; no new work may start

---The app's state while plugin code runs.
---@alias lifeline.AppState
---| "inactive" # in the foreground, not receiving events
---| "active" # in the foreground
---| "background" # in the background: the budget is running

---What a fetch or a silent push brought.
---@alias lifeline.FetchResult
---| "newData" # new data arrived
---| "noData" # nothing new
---| "failed" # the attempt failed

---What the store keeps: strings (UTF-8), numbers, booleans, and arrays or string-keyed tables of them.
---@alias lifeline.StoreValue string|number|boolean|table

---An operation for a queue: a function, or a table that says more.
---@alias lifeline.OperationSpec (async fun(op: lifeline.Operation))|lifeline.OperationOptions

---The kind of a scheduled task request.
---@alias lifeline.TaskKind
---| "refresh" # a short refresh (BGAppRefreshTask)
---| "processing" # a long maintenance task (BGProcessingTask)

---What `lifeline.on` and `lifeline.after` return: `:cancel()` unsubscribes or stops the timer.
---@class lifeline.Handle
local Handle = {}

---Unsubscribes, or stops the timer; harmless when repeated.
function Handle:cancel() end

---The table a handler of `lifeline.on` gets.
---@class lifeline.Event
---@field name lifeline.EventName the notification's name
---@field time number seconds since the host started, on the host's clock
---@field state lifeline.AppState the app's state while the handlers run
---@field id? string the transfer's id (transfer events)
---@field reason? string why the transfer failed (`transferDidFail`)
---@field received? integer bytes so far (`transferProgress`)
---@field total? integer bytes in all, when known (`transferProgress`)
---@field payload? table the push's JSON object (`didReceiveRemoteNotification`)
local Event = {}

---`performFetch`, `didReceiveRemoteNotification` and `didFinishTransferEvents`: the completion to call once; `false` when called already or late.
---@param result? lifeline.FetchResult none for `didFinishTransferEvents`
---@return boolean
---@overload fun(self: lifeline.Event, result?: lifeline.FetchResult): boolean
function Event.complete(result) end

---The figures in force (`lifeline.profile()`), command-line flags included; times in seconds.
---@class lifeline.Profile
---@field name string the profile's name, as `"ios13"`
---@field budget number the background budget
---@field expirationLead number how long before the budget's end the expiration handlers run
---@field launchLimit number the watchdog's limit for launch
---@field backgroundLimit number the watchdog's limit for `didEnterBackground`
---@field transitionLimit number the watchdog's limit for other transitions, timers and work slices
---@field terminateLimit number the watchdog's limit for `willTerminate`
---@field expirationHandlerLimit number the limit of each expiration handler
---@field taskLimit integer how many background tasks may be active at once

---The handle of a `lifeline.background` work: its background task's `id`, and its methods.
---@class lifeline.Work
---@field id integer the background task's id
local Work = {}

---Cancels the work (harmless once it is done).
function Work:cancel() end

---Whether the work has finished.
---@return boolean
function Work:done() end

---Waits for the work: `true` and `fn`'s values, or `false` and the error.
---@async
---@return boolean ok
---@return any ... `fn`'s values, or a `lifeline.Error`
function Work:wait() end

---The first argument of `lifeline.background` as a table.
---@class lifeline.WorkOptions
---@field name? string the task's name in the timeline
---@field task? integer a background task the plugin already holds: the work runs under it, and ends none

---The error value of waits and requests; `tostring(err)` is its message.
---@class lifeline.Error
---@field kind string `expired`, `cancelled`, `error`, or a request's `timeout`, `connect`, `tls`, `tooLarge`, `notPermitted`, `redirect`
---@field message string what happened
---@field expired? true the task expired
---@field cancelled? true the work was cancelled

---The table `lifeline.http.request` takes.
---@class lifeline.HTTPRequest
---@field url string `http://` or `https://`; the host must be listed in plugin.toml's `[permissions] network`
---@field method? string `"GET"` by default
---@field headers? table<string, string> header names to values
---@field body? string the request's body
---@field timeout? number seconds, > 0; 60 by default

---The answer of `lifeline.http.request`.
---@class lifeline.HTTPResponse
---@field status integer the HTTP status
---@field headers table<string, string> lowercased names; repeated headers joined with `", "`
---@field body string the body

---The options of `lifeline.queue`.
---@class lifeline.QueueOptions
---@field maxConcurrent? integer how many operations run at once, >= 1; 1 by default

---An operation queue (`lifeline.queue`), shared by name by every plugin of the host.
---@class lifeline.Queue
---@field name string the queue's name
local Queue = {}

---Adds an operation: its handle, or nil when `unique = "drop"` dropped it.
---@param operation lifeline.OperationSpec
---@return lifeline.Operation?
function Queue:add(operation) end

---Adds operations that run one after another: their handles.
---@param list lifeline.OperationSpec[]
---@param options? {wait?: boolean} `wait = true` waits until the last one finished
---@return lifeline.Operation[]
function Queue:addSequential(list, options) end

---Starts nothing more until `resume`; calls are counted.
function Queue:suspend() end

---Undoes one `suspend`: `false` when the queue was not suspended.
---@return boolean
function Queue:resume() end

---Cancels every pending and running operation.
function Queue:cancelAll() end

---Calls `fn` when the queue starts working, or when it drained.
---@param event "willStartOperations"|"didFinishOperations"
---@param fn fun()
function Queue:on(event, fn) end

---Pending and running operations.
---@return integer
function Queue:count() end

---Whether the queue is suspended.
---@return boolean
function Queue:isSuspended() end

---An operation for `q:add` as a table.
---@class lifeline.OperationOptions
---@field run async fun(op: lifeline.Operation) what the operation does, in a coroutine the host runs
---@field async? boolean `true`: it finishes at `op:finish()`, not when `run` returns
---@field name? string shown in the report, and used by `unique`
---@field unique? "ignore"|"drop"|"replace" what to do when an operation of this name is pending or running
---@field timeout? number seconds from its start, > 0; 10 by default, `math.huge` for none
---@field onTimeout? fun(op: lifeline.Operation) called when the timeout passes

---An operation's handle (`q:add`); it keeps answering after the operation finished.
---@class lifeline.Operation
---@field id integer unique for the host's life
---@field name string? its name, or nil
local Operation = {}

---Finishes the operation: `false` when it had finished.
---@return boolean
function Operation:finish() end

---A pending operation finishes without running; a running one's waiting call raises `cancelled`.
function Operation:cancel() end

---Whether it was cancelled, timed out or expired.
---@return boolean
function Operation:isCancelled() end

---Whether it finished.
---@return boolean
function Operation:isFinished() end

---Waits until the operation finished.
---@async
---@return boolean ok
---@return ("cancelled"|"timedOut"|"expired"|"failed")? why how it ended when not ok
function Operation:wait() end

---A background transfer, as `lifeline.transfers.list()` gives it.
---@class lifeline.Transfer
---@field id string the transfer's id
---@field kind "download"|"upload"
---@field url string
---@field file string the file, relative to the plugin's files folder
---@field state "queued"|"running"|"finished"|"failed"|"cancelled"
---@field received integer bytes so far
---@field total? integer bytes in all, when known
---@field reason? string why it failed

---The table `lifeline.transfers.download` takes.
---@class lifeline.DownloadRequest
---@field url string http or https; the host must be permitted
---@field to string the file to write, relative to the plugin's files folder
---@field sha256? string 64 hex digits, checked before the file gets its name
---@field id? string the transfer's id; asking again with it returns the unfinished one

---The table `lifeline.transfers.upload` takes.
---@class lifeline.UploadRequest
---@field url string http or https; the host must be permitted
---@field from string the file to send, relative to the plugin's files folder
---@field method? "PUT"|"POST" `"PUT"` by default
---@field id? string the transfer's id

---A scheduled task request: what `lifeline.tasks.submit` takes and `lifeline.tasks.pending()` lists.
---@class lifeline.TaskRequest
---@field identifier string listed in plugin.toml's `[background] identifiers`
---@field kind lifeline.TaskKind
---@field earliestBegin? number seconds from now (submit; 0 by default), or on `lifeline.now()`'s clock (pending)
---@field requiresNetwork? boolean false by default
---@field requiresPower? boolean false by default

---The task a handler of `lifeline.tasks.register` gets; complete it before its time runs out.
---@class lifeline.ScheduledTask
---@field id integer
---@field identifier string
---@field kind lifeline.TaskKind
---@field expirationHandler? fun() set it: called shortly before the task's time runs out
local ScheduledTask = {}

---Completes the task: `false` when called already or late.
---@param success boolean
---@return boolean
function ScheduledTask:setTaskCompleted(success) end

---The Lifeline host's API for plugins: a global, and `require("lifeline")`.
---@class lifelinelib
lifeline = {}

---Subscribes `fn` to a lifecycle notification; an unknown name is an error that lists the valid ones.
---@param event lifeline.EventName
---@param fn fun(event: lifeline.Event) called with the event's table
---@return lifeline.Handle handle `handle:cancel()` unsubscribes
function lifeline.on(event, fn) end

---Begins a background task; end it on every path with `lifeline.endBackgroundTask(id)`.
---@param name? string the task's name in the timeline
---@param onExpire? fun() called at the expiration moment; it should end the task
---@return integer id the task's id, > 0 (0 when the task limit is passed)
---@overload fun(onExpire: fun()): integer
function lifeline.beginBackgroundTask(name, onExpire) end

---Ends a task: `true`, or `false` for an id that is unknown or already ended (harmless).
---@param id integer
---@return boolean ended
function lifeline.endBackgroundTask(id) end

---Seconds left of the app's background budget; `math.huge` in the foreground.
---@return number seconds
function lifeline.backgroundTimeRemaining() end

---The app's state now.
---@return lifeline.AppState
function lifeline.state() end

---Seconds since the host started, on the host's clock (virtual in `simulate`).
---@return number seconds
function lifeline.now() end

---A new table of the profile's figures in force.
---@return lifeline.Profile
function lifeline.profile() end

---A one-shot timer: calls `fn` `seconds` from now.
---@param seconds number finite, >= 0; the resolution is 1 ms
---@param fn fun()
---@return lifeline.Handle handle `handle:cancel()` stops it
function lifeline.after(seconds, fn) end

---Begins a background task and runs `fn(task, ...)` in a coroutine the host owns, from the next turn; the task ends on every path.
---@param name string|lifeline.WorkOptions|nil the task's name, or `{task = id, name = ...}` to run under a task you hold
---@param fn async fun(task: lifeline.Work, ...: any): any the work; it may wait; `task:wait()` answers what it returns
---@param ... any passed to `fn` after the handle
---@return lifeline.Work task
function lifeline.background(name, fn, ...) end

---Waits `seconds` on the host's clock.
---@async
---@param seconds number finite, >= 0
function lifeline.sleep(seconds) end

---plugin.toml's `[config]` table.
---@type table<string, any>
lifeline.config = nil

---The host log, tagged with the plugin's name.
---@class lifeline.loglib
lifeline.log = {}

---Writes one line at `debug` to the host log.
---@param ... any
function lifeline.log.debug(...) end

---Writes one line at `info` to the host log (as `print` does).
---@param ... any
function lifeline.log.info(...) end

---Writes one line at `warning` to the host log.
---@param ... any
function lifeline.log.warning(...) end

---Writes one line at `error` to the host log.
---@param ... any
function lifeline.log.error(...) end

---HTTP requests, from inside `lifeline.background`.
---@class lifeline.httplib
lifeline.http = {}

---Makes an HTTP request and waits for its answer.
---@async
---@param request lifeline.HTTPRequest
---@return lifeline.HTTPResponse? response
---@return lifeline.Error? err when the request failed
function lifeline.http.request(request) end

---A JSON codec whose memory counts against the plugin's cap.
---@class lifeline.jsonlib
lifeline.json = {}

---Encodes a value as JSON, with object keys in byte order.
---@param value any
---@return string? text
---@return string? message why it cannot be encoded
function lifeline.json.encode(value) end

---Decodes JSON text; `null` becomes `lifeline.json.null`.
---@param text string
---@return any value
---@return string? message why it is not JSON
function lifeline.json.decode(text) end

---The value JSON `null` decodes to and encodes from.
---@type lightuserdata
lifeline.json.null = nil

---`lifeline.queue(name, [options])` makes or gets an operation queue.
---@class lifeline.queuelib
---@overload fun(name: string, options?: lifeline.QueueOptions): lifeline.Queue
lifeline.queue = {}

---The global queue: up to 4 operations at once; `lifeline.queue("background")` is the same queue.
---@type lifeline.Queue
lifeline.queue.background = nil

---The plugin's durable key-value store.
---@class lifeline.storelib
lifeline.store = {}

---The value stored under `key`, or nil.
---@param key string
---@return lifeline.StoreValue?
function lifeline.store.get(key) end

---Stores `value` under `key`; raises over the quota.
---@param key string non-empty UTF-8, at most 1024 bytes
---@param value lifeline.StoreValue
function lifeline.store.set(key, value) end

---Removes `key`: whether it was there.
---@param key string
---@return boolean
function lifeline.store.delete(key) end

---The keys that start with `prefix`, in byte order.
---@param prefix? string
---@return string[]
function lifeline.store.keys(prefix) end

---Runs `fn`: its changes are written together when it returns, or not at all when it raises; it may not wait.
---@param fn fun()
function lifeline.store.transaction(fn) end

---The plugin's own files folder (the sandbox has no `io`).
---@class lifeline.fileslib
lifeline.files = {}

---Writes a file, atomically; folders on the way are made.
---@param name string relative to the plugin's files folder
---@param data string
function lifeline.files.write(name, data) end

---A file's bytes; nil and a message when there is no such file.
---@param name string
---@return string? data
---@return string? message
function lifeline.files.read(name) end

---Removes a file or an empty folder: whether there was one.
---@param name string
---@return boolean
function lifeline.files.remove(name) end

---The names of the plugin's files, in byte order.
---@return string[]
function lifeline.files.list() end

---A file's size in bytes, or nil when there is no such file.
---@param name string
---@return integer?
function lifeline.files.size(name) end

---Background transfers the host owns.
---@class lifeline.transferslib
lifeline.transfers = {}

---Starts a download the host owns; it goes on while the app is suspended.
---@param request lifeline.DownloadRequest
---@return string id
function lifeline.transfers.download(request) end

---Starts an upload the host owns.
---@param request lifeline.UploadRequest
---@return string id
function lifeline.transfers.upload(request) end

---The plugin's transfers, oldest first.
---@return lifeline.Transfer[]
function lifeline.transfers.list() end

---Cancels an unfinished transfer: whether there was one.
---@param id string
---@return boolean
function lifeline.transfers.cancel(id) end

---Work the system runs later, as BGTaskScheduler does.
---@class lifeline.taskslib
lifeline.tasks = {}

---While the plugin loads: `fn(task)` runs each time the system runs a request for `identifier`.
---@param identifier string listed in plugin.toml's `[background] identifiers`
---@param fn fun(task: lifeline.ScheduledTask)
function lifeline.tasks.register(identifier, fn) end

---Asks the system for a run; replaces a pending request of the same identifier.
---@param request lifeline.TaskRequest
function lifeline.tasks.submit(request) end

---Cancels a pending request: whether one was pending.
---@param identifier string
---@return boolean
function lifeline.tasks.cancel(identifier) end

---The plugin's pending requests.
---@return lifeline.TaskRequest[]
function lifeline.tasks.pending() end

return lifeline
