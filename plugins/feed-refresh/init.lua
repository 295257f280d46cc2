-- feed-refresh: an app refresh task, as an iOS 13 app schedules one with BGTaskScheduler.
--
-- * The handler is registered while the plugin loads: later, the system would refuse it.
-- * Each run schedules the next one first (every `every` seconds, with a network), so a failed
--   fetch does not end the chain.
-- * The fetch runs in a background work; the task is completed once the feed is saved, or with
--   false when the request fails or time runs out (the expiration handler cancels the work).

local ID = "com.example.feed.refresh"
local url = lifeline.config.url
local every = lifeline.config.every or 900

local function scheduleNext()
  lifeline.tasks.submit{identifier = ID, kind = "refresh", earliestBegin = every, requiresNetwork = true}
end

lifeline.tasks.register(ID, function(task)
  scheduleNext()
  local work = lifeline.background("feed refresh", function()
    local response, err = lifeline.http.request{url = url}
    if not response or response.status ~= 200 then
      lifeline.log.warning("feed-refresh: fetch failed: " .. (response and ("status " .. response.status) or err.kind))
      task:setTaskCompleted(false)
      return
    end
    local feed = lifeline.json.decode(response.body)
    -- A 200 may still carry something else than a feed: keep the one saved before.
    if type(feed) ~= "table" or type(feed.items) ~= "table" then
      lifeline.log.warning("feed-refresh: the answer is not a feed")
      task:setTaskCompleted(false)
      return
    end
    lifeline.store.set("feed", feed)
    lifeline.store.set("fetchedAt", lifeline.now())
    print("feed-refresh: saved " .. #feed.items .. " items")
    task:setTaskCompleted(true)
  end)
  task.expirationHandler = function()
    lifeline.log.warning("feed-refresh: out of time")
    work:cancel()
    task:setTaskCompleted(false)
  end
end)

lifeline.on("didFinishLaunching", function()
  -- A launch by the user schedules the first refresh; one the system made for the task has
  -- its request already.
  if #lifeline.tasks.pending() == 0 then scheduleNext() end
end)
