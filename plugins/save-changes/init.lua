-- save-changes: when the app leaves the foreground, save what the user changed.
-- The save is wrapped in a background task that ends on every path: when the save
-- succeeds, when it fails, and when the time runs out.

local store = require("store")

-- Runs work(done) inside a background task. The task ends exactly once, whichever
-- comes first: work calls done(), work raises, or the expiration handler fires.
local function withBackgroundTask(name, work)
  local id, ended = 0, false
  local function finish(why)
    if ended then return end
    ended = true
    lifeline.log.info(name .. " finished: " .. why)
    lifeline.endBackgroundTask(id)
  end
  id = lifeline.beginBackgroundTask(name, function() finish("expired") end)
  local ok, err = pcall(work, function(result) finish(result or "ok") end)
  if not ok then
    lifeline.log.error(name .. " failed: " .. tostring(err))
    finish("failed")
  end
end

local edits = 0
lifeline.on("didBecomeActive", function() edits = edits + 3 end)

lifeline.on("didEnterBackground", function()
  withBackgroundTask("save", function(done)
    local batch = store.take(edits)
    edits = 0
    -- Writing takes two seconds; a corrupt batch fails before anything is written.
    if batch.corrupt then error("batch " .. batch.number .. " is corrupt") end
    lifeline.after(2, function() done("saved " .. batch.size .. " edits") end)
  end)
end)
