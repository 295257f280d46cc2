-- session-end: tells a web service that the session ended, as the app enters the background.
--
-- The call runs inside lifeline.background, so its background task ends on every path: the
-- server answers, fails, cannot be reached, or the task expires while the request hangs.

local url = lifeline.config.url

local function report(_task, event)
  local body = lifeline.json.encode({event = "sessionEnd", at = event.time})
  -- A waiting call raises when the task expires: catch it, so the log says what happened.
  local ok, response, err = pcall(lifeline.http.request, {
    method = "POST",
    url = url,
    headers = {["Content-Type"] = "application/json"},
    body = body,
  })
  if not ok then
    lifeline.log.warning("session-end: gave up: " .. tostring(response))
    return
  end
  if not response then
    lifeline.log.warning("session-end: request failed (" .. err.kind .. "): " .. err.message)
    return
  end
  if response.status ~= 200 then
    lifeline.log.warning("session-end: the server answered " .. response.status)
    return
  end
  local reply, decodeError = lifeline.json.decode(response.body)
  if reply and reply.success == true then
    lifeline.log.info("session-end: reported")
  else
    lifeline.log.warning("session-end: the server did not confirm: " .. tostring(decodeError or response.body))
  end
end

lifeline.on("didEnterBackground", function(event)
  local remaining = lifeline.backgroundTimeRemaining()
  if remaining <= 1.0 then
    lifeline.log.warning("session-end: only " .. remaining .. " s of background time left; not reporting")
    return
  end
  lifeline.background("session-end", report, event)
end)
