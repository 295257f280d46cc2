-- downloads: a queue of downloads that keeps working in the background only until it
-- drains. It begins its task when the app enters the background (not before), ends it
-- when the queue is empty, and ends it cleanly from the expiration handler if time
-- runs out first. What is left waits for the next background period.

local queue = {}
local secondsPerItem = 4
local taskId = 0
local running = false

for i = 1, 9 do queue[#queue + 1] = "file-" .. i end

local function endTask()
  if taskId ~= 0 then
    lifeline.endBackgroundTask(taskId)
    taskId = 0
  end
end

local function step()
  if #queue == 0 or taskId == 0 then
    running = false
    lifeline.log.info("queue stopped with " .. #queue .. " left")
    endTask()
    return
  end
  lifeline.after(secondsPerItem, function()
    if taskId == 0 then running = false; return end  -- expired while we waited
    local item = table.remove(queue, 1)
    lifeline.log.info("downloaded " .. item)
    step()
  end)
end

lifeline.on("didEnterBackground", function()
  if #queue == 0 then return end
  taskId = lifeline.beginBackgroundTask("downloads", function()
    lifeline.log.warning("out of time with " .. #queue .. " downloads left")
    endTask()
  end)
  if not running then
    running = true
    step()
  end
end)

lifeline.on("willEnterForeground", function()
  -- Back in the foreground no task is needed: end it. The queue stops at its next step and
  -- picks up again at the next background period.
  endTask()
end)
