-- nightly-cleanup: a processing task, as an iOS 13 app schedules one with BGTaskScheduler.
--
-- * It needs power, as maintenance should: it waits for the charger.
-- * It compacts the store in batches, a pause between them, so it takes minutes. The cursor is
--   saved after every batch.
-- * When its time runs out, the expiration handler stops it between two batches, completes the
--   task unsuccessfully and schedules it again: the next run goes on from the cursor.

local ID = "com.example.cleanup"
local keep = lifeline.config.keep or 0
local batch = lifeline.config.batch or 10
local pause = lifeline.config.pause or 5

local function schedule()
  lifeline.tasks.submit{identifier = ID, kind = "processing", earliestBegin = 60, requiresPower = true}
end

-- The log entries, oldest first (their keys sort by age).
local function entries() return lifeline.store.keys("log:") end

lifeline.tasks.register(ID, function(task)
  local stopped = false
  local removed = 0
  local function step()
    if stopped then return end
    local keys = entries()
    local extra = #keys - keep
    if extra <= 0 then
      lifeline.store.set("cleanup:last", {at = lifeline.now(), removed = removed})
      print("nightly-cleanup: compacted, " .. removed .. " entries removed, " .. #keys .. " left")
      task:setTaskCompleted(true)
      return
    end
    lifeline.store.transaction(function()
      for i = 1, math.min(batch, extra) do lifeline.store.delete(keys[i]) end
    end)
    removed = removed + math.min(batch, extra)
    lifeline.after(pause, step)
  end
  task.expirationHandler = function()
    stopped = true
    print("nightly-cleanup: out of time after " .. removed .. " entries; " .. (#entries() - keep) .. " to go")
    task:setTaskCompleted(false)
    schedule()
  end
  step()
end)

lifeline.on("didFinishLaunching", function()
  -- A log to compact: 400 entries the first time the plugin runs.
  if #entries() == 0 and not lifeline.store.get("cleanup:last") then
    lifeline.store.transaction(function()
      for i = 1, 400 do lifeline.store.set(string.format("log:%04d", i), {n = i}) end
    end)
  end
  if #lifeline.tasks.pending() == 0 then schedule() end
end)
