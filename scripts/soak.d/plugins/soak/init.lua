-- The soak test's plugin (scripts/soak). The driver sends work in silent pushes: the payload's
-- "soak" array holds operations, each with an "id". The plugin carries each out and logs one
-- line that starts with "ack", "http" or "transfer", which the driver reads on the host's stderr:
-- a write is acknowledged only once the call that makes it durable has returned.
local store, files, transfers = lifeline.store, lifeline.files, lifeline.transfers
local base = "http://127.0.0.1:" .. math.tointeger(lifeline.config.port)

-- The bytes of a value, a file or a download: SEED's 8 hex digits repeated to LEN bytes. The
-- driver (scripts/soak.d/driver.py) makes the same bytes to compare.
local function bytes(seed, len)
  local unit = string.format("%08x", seed)
  return string.rep(unit, len // 8 + 1):sub(1, len)
end

local function say(...) lifeline.log.info(...) end

-- A JSON number as an integer: "7", never "7.0", in a URL or a log line.
local function int(n) return math.tointeger(n) or n end

local ops = {}

function ops.set(op)
  store.set(op.key, bytes(op.seed, op.len))
  say("ack", op.id)
end

function ops.del(op)
  store.delete(op.key)
  say("ack", op.id)
end

-- Several keys written together, or none of them.
function ops.tx(op)
  store.transaction(function()
    for _, w in ipairs(op.writes) do store.set(w.key, bytes(w.seed, w.len)) end
  end)
  say("ack", op.id)
end

-- Reads a key back during the run: "check ID ok", or "check ID bad" with what was found.
function ops.check(op)
  local value = store.get(op.key)
  local want = op.len and bytes(op.seed, op.len) or nil
  if value == want then say("check", op.id, "ok")
  else say("check", op.id, "bad", value == nil and "nil" or (#value .. " bytes")) end
end

function ops.fwrite(op)
  files.write(op.name, bytes(op.seed, op.len))
  say("ack", op.id)
end

function ops.frm(op)
  files.remove(op.name)
  say("ack", op.id)
end

-- A request to the driver's server, in a background task: "http ID ok" when the answer is the
-- bytes asked for (a POST's are echoed back), "http ID failed KIND" when the request failed.
function ops.http(op)
  lifeline.background("http " .. op.id, function()
    local url = base .. "/echo/" .. op.id .. "?seed=" .. int(op.seed) .. "&len=" .. int(op.len)
      .. "&delay=" .. int(op.delay or 0)
    local want = bytes(op.seed, op.len)
    local response, err
    if op.method == "POST" then
      response, err = lifeline.http.request{method = "POST", url = url, body = want, timeout = 10}
    else
      response, err = lifeline.http.request{url = url, timeout = 10}
    end
    if not response then say("http", op.id, "failed", err.kind)
    elseif response.status ~= 200 or response.body ~= want then
      say("http", op.id, "bad", response.status, #response.body)
    else say("http", op.id, "ok") end
  end)
  say("ack", op.id)
end

-- A download of the driver's /blob, checked by its SHA-256 before it gets its name.
function ops.dl(op)
  local tid = transfers.download{
    url = base .. "/blob/" .. op.id .. "?seed=" .. int(op.seed) .. "&len=" .. int(op.len),
    to = "dl/" .. op.id, sha256 = op.sha256, id = "d" .. op.id}
  say("ack", op.id, tid)
end

function ops.up(op)
  files.write("up/" .. op.id, bytes(op.seed, op.len))
  local tid = transfers.upload{url = base .. "/upload/" .. op.id, from = "up/" .. op.id,
    method = "PUT", id = "u" .. op.id}
  say("ack", op.id, tid)
end

function ops.cancel(op)
  say("ack", op.id, tostring(transfers.cancel(op.transfer)))
end

-- Every key the driver wrote (prefix "k"), posted to the driver's /dump as one JSON object,
-- with the transfers the host lists.
function ops.dump(op)
  lifeline.background("dump", function()
    local all = {}
    for _, key in ipairs(store.keys("k")) do all[key] = store.get(key) end
    local list = {}
    for _, t in ipairs(transfers.list()) do list[#list + 1] = {id = t.id, state = t.state} end
    local body = lifeline.json.encode({id = op.id, store = all, transfers = list})
    local response, err = lifeline.http.request{method = "POST", url = base .. "/dump/" .. op.id,
      body = body, timeout = 30}
    if response then say("ack", op.id) else say("http", op.id, "failed", err.kind) end
  end)
end

lifeline.on("didReceiveRemoteNotification", function(event)
  for _, op in ipairs(event.payload.soak or {}) do ops[op.op](op) end
  event.complete("newData")
end)

lifeline.on("transferDidFinish", function(e)
  say("transfer", e.id, "finished", files.size("dl/" .. e.id:sub(2)) or "-")
end)

lifeline.on("transferDidFail", function(e)
  say("transfer", e.id, "failed", e.reason)
end)

lifeline.on("didFinishTransferEvents", function(event) event.complete() end)

-- The rest of the lifecycle, with a little work of its own, so every event has a handler.
lifeline.on("performFetch", function(event)
  lifeline.after(0.1, function() event.complete("noData") end)
end)

lifeline.on("didEnterBackground", function()
  local id
  id = lifeline.beginBackgroundTask("save", function() lifeline.endBackgroundTask(id) end)
  lifeline.after(0.3, function() lifeline.endBackgroundTask(id) end)
end)

lifeline.on("didReceiveMemoryWarning", function() say("memory warning") end)

local function submit(identifier, kind)
  lifeline.tasks.submit{identifier = identifier, kind = kind, earliestBegin = 3600}
end

for identifier, kind in pairs({["soak.refresh"] = "refresh", ["soak.processing"] = "processing"}) do
  lifeline.tasks.register(identifier, function(task)
    task.expirationHandler = function() task:setTaskCompleted(false) end
    lifeline.after(0.2, function()
      task:setTaskCompleted(true)
      submit(identifier, kind)
    end)
  end)
end

lifeline.on("didFinishLaunching", function()
  submit("soak.refresh", "refresh")
  submit("soak.processing", "processing")
  say("ready")
end)
