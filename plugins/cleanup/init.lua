-- cleanup: prunes a cache when the app enters the background. The handler returns
-- at once (blocking there would trip the 5 s watchdog); the work goes on in small
-- steps on the main executor, inside a background task that ends when it is done.

local cache = {}
for i = 1, 50 do cache[i] = string.rep("x", 100) end

lifeline.on("didEnterBackground", function()
  local id
  id = lifeline.beginBackgroundTask("cleanup", function()
    lifeline.endBackgroundTask(id)
  end)
  local function prune()
    for _ = 1, 10 do
      if #cache == 0 then break end
      table.remove(cache)
    end
    if #cache > 0 then
      lifeline.after(0.5, prune)
    else
      lifeline.log.info("cache pruned")
      lifeline.endBackgroundTask(id)
    end
  end
  lifeline.after(0, prune)
end)
