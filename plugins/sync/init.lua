-- sync: Backgroundable-style operation queues.
--
-- * A refresh is a named operation with unique = "drop": asking again while one is queued or
--   running adds nothing.
-- * Three dependent uploads go on a serial queue with addSequential: part 2 needs the batch id
--   that part 1 gets, and part 3 commits. They run in that order whatever each waits on.
-- * Each queue holds one background task while it has work. If it expires, the running upload
--   is stopped, the rest stay queued, and they run once the app is back in the foreground.

local base = lifeline.config.url
local refreshes = lifeline.queue("sync.refresh")
local uploads = lifeline.queue("sync.uploads")

local function refresh(reason)
  local op = refreshes:add{
    name = "refresh",
    unique = "drop",
    timeout = 5,
    onTimeout = function(op) lifeline.log.warning("sync: refresh " .. op.id .. " timed out") end,
    run = function()
      local response, err = lifeline.http.request{url = base .. "/refresh"}
      print("sync: refreshed", response and response.status or err.kind)
    end,
  }
  print("sync: refresh (" .. reason .. ")", op and ("operation " .. op.id) or "dropped: one is pending")
end

local batch = nil  -- what part 1 gets from the server, and parts 2 and 3 need

local function post(path, body)
  local response, err = lifeline.http.request{method = "POST", url = base .. path, body = body}
  if not response then error("POST " .. path .. ": " .. err.kind) end
  if response.status >= 300 then error("POST " .. path .. ": status " .. response.status) end
  return response
end

local function uploadAll(items)
  local parts
  parts = uploads:addSequential({
    {name = "upload-begin", timeout = 30, async = true, run = function(op)
      local ok, response = pcall(post, "/batches", lifeline.json.encode({count = #items}))
      -- The server's answer is checked, not trusted: a 200 may carry anything.
      local answer = ok and lifeline.json.decode(response.body)
      local id = type(answer) == "table" and math.type(answer.id) == "integer" and answer.id
      if id then
        batch = string.format("%d", id)
      else
        -- The parts after this one depend on it: cancel them.
        local why = ok and "the server's answer holds no batch id" or tostring(response)
        lifeline.log.warning("sync: " .. why .. "; cancelling the rest")
        parts[2]:cancel()
        parts[3]:cancel()
      end
      op:finish()
    end},
    {name = "upload-items", timeout = 30, run = function()
      post("/batches/" .. batch .. "/items", lifeline.json.encode(items))
    end},
    {name = "upload-commit", timeout = 30, run = function()
      post("/batches/" .. batch .. "/commit", "")
      print("sync: batch " .. batch .. " committed")
    end},
  })
end

uploads:on("willStartOperations", function() print("sync: uploading") end)
uploads:on("didFinishOperations", function() print("sync: uploads done") end)

lifeline.on("didBecomeActive", function()
  refresh("became active")
  refresh("asked again")
end)

lifeline.on("didEnterBackground", function()
  uploadAll({"note-1", "note-2"})
end)
