-- A stand-in for the app's storage: every second batch is corrupt, so both the
-- success path and the failure path of the save run in one scenario.
local store = { batches = 0 }

function store.take(size)
  store.batches = store.batches + 1
  return { number = store.batches, size = size, corrupt = store.batches % 2 == 0 }
end

return store
