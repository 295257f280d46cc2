-- offline-sync: the user's unsent changes are saved to the store the moment the app enters the
-- background (they must survive a kill), and the day's catalogue is fetched as a background
-- transfer. The host owns the transfer: it goes on while the app is suspended or killed, and when
-- it ends the host wakes the app in the background to hear about it.
local store = lifeline.store
local base = lifeline.config.url

lifeline.on('didFinishLaunching', function(e)
  local pending = store.get('pending') or {}
  lifeline.log.info(('launched in state %s with %d pending change(s)'):format(e.state, #pending))
end)

lifeline.on('didEnterBackground', function()
  -- 1. Save the work first: when store.set returns, it survives a SIGKILL.
  local pending = store.get('pending') or {}
  pending[#pending + 1] = {at = lifeline.now(), what = 'edit'}
  store.set('pending', pending)
  -- 2. Hand the download to the host. The id keeps a second background from starting it twice.
  local id = lifeline.transfers.download{url = base .. '/catalogue.json', to = 'catalogue.json', id = 'catalogue'}
  lifeline.log.info(('saved %d pending change(s); download %s under way'):format(#pending, id))
end)

-- 3. Heard when the app next runs: here, after the host relaunched it in the background.
lifeline.on('transferDidFinish', function(e)
  store.transaction(function()
    store.set('catalogue', {ready = true, at = lifeline.now()})
    store.delete('pending')  -- the catalogue holds them now
  end)
  lifeline.log.info(('download %s finished; heard in state %s'):format(e.id, e.state))
end)

lifeline.on('transferDidFail', function(e)
  lifeline.log.warning(('download %s failed: %s'):format(e.id, e.reason))
end)

-- As iOS's handleEventsForBackgroundURLSession completion handler: call it once the batch is
-- handled, or the app stays awake until the profile's limit for nothing.
lifeline.on('didFinishTransferEvents', function(event)
  lifeline.log.info('all transfer events handled')
  event.complete()
end)
