import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// task:wait() answers `true` and every value the work's function returned, so one background work
// can use another's result (composition, as RACSignal's).

/// `v` as one word a mark can carry: its type and value; "nil" for nil.
private let describe = """
    local function show(...)
      local parts = {tostring(select('#', ...))}
      for i = 1, select('#', ...) do
        local v = select(i, ...)
        parts[#parts + 1] = type(v) == 'table' and ('table:' .. tostring(v.kind or v.n)) or tostring(v)
      end
      return table.concat(parts, ',')
    end

    """

@Test func wait_whileTheWorkRuns_answersTrueAndEveryValueItReturned_nilsInTheMiddleIncluded() throws {
    let source = describe + """
        local producer = lifeline.background('produce', function()
          lifeline.sleep(1)
          return 1, nil, 'x'
        end)
        lifeline.background('consume', function()
          local ok, a, b, c = producer:wait()
          mark('wait:' .. show(producer:wait()))
          -- The values are usable as they are: a number, a nil, a string.
          mark('use:' .. tostring(ok) .. ':' .. (a + 41) .. ':' .. tostring(b == nil) .. ':' .. c:upper())
          mark('at:' .. lifeline.now())
        end)
        """
    #expect(try marksOf(source) == ["wait:4,true,1,nil,x", "use:true:42:true:X", "at:1.0"])
}

@Test func wait_afterTheWorkFinished_answersTheSameValues_toEveryWaiter() throws {
    let source = describe + """
        local shared = {n = 7}
        local producer = lifeline.background('produce', function() return shared, nil, nil end)
        for i = 1, 2 do
          lifeline.background('late-' .. i, function()
            lifeline.sleep(i)
            local ok, t, x, y = producer:wait()
            -- The very table the producer returned, not a copy; trailing nils counted too.
            mark(i .. ':' .. show(producer:wait()) .. ':' .. tostring(t == shared))
          end)
        end
        """
    #expect(try marksOf(source) == ["1:4,true,table:7,nil,nil:true", "2:4,true,table:7,nil,nil:true"])
}

@Test func wait_forAWorkThatReturnedNothing_answersTrueAlone() throws {
    let source = describe + """
        local quiet = lifeline.background('quiet', function() lifeline.sleep(1) end)
        local onlyNil = lifeline.background('nil', function() lifeline.sleep(1); return nil end)
        lifeline.background('waiter', function()
          mark('quiet:' .. show(quiet:wait()))
          mark('nil:' .. show(onlyNil:wait()))
        end)
        """
    #expect(try marksOf(source) == ["quiet:1,true", "nil:2,true,nil"])
}

@Test func wait_forAWorkThatRaised_answersFalseAndTheError_beforeAndAfterItEnded() throws {
    let source = describe + """
        local bad = lifeline.background('bad', function() lifeline.sleep(1); error('no luck', 0) end)
        lifeline.background('early', function()
          local ok, err = bad:wait()
          mark('early:' .. tostring(ok) .. ',' .. err.kind .. ',' .. err.message)
        end)
        lifeline.background('late', function()
          lifeline.sleep(5)
          mark('late:' .. show(bad:wait()))
        end)
        """
    let recorder = try simulate(plugins(["p": source]))
    #expect(pluginErrors(recorder).map(\.message) == ["no luck"])
    #expect(marks(recorder) == ["early:false,error,no luck", "late:2,false,table:error"])
}

@Test func wait_composesAChain_eachWorkUsingTheResultOfTheOneBefore() throws {
    // fetch -> parse -> total, each a work of its own, as signals compose.
    let source = """
        local fetch = lifeline.background('fetch', function()
          lifeline.sleep(1)
          return '{"items": [3, 4, 5]}'
        end)
        local parse = lifeline.background('parse', function()
          local ok, body = fetch:wait()
          if not ok then error(body) end
          return lifeline.json.decode(body).items
        end)
        lifeline.background('total', function()
          local ok, items = parse:wait()
          local sum = 0
          for _, n in ipairs(items) do sum = sum + n end
          mark('total:' .. sum .. ' at ' .. lifeline.now())
        end)
        """
    #expect(try marksOf(source) == ["total:12 at 1.0"])
}

@Test func wait_manyValues_allArrive() throws {
    let source = """
        local many = lifeline.background('many', function()
          local t = {}
          for i = 1, 5000 do t[i] = i end
          lifeline.sleep(1)
          return table.unpack(t)
        end)
        local function check(tag, ok, ...)
          local n, sum = select('#', ...), 0
          for i = 1, n do sum = sum + select(i, ...) end
          mark(tag .. ':' .. tostring(ok) .. ',' .. n .. ',' .. sum)
        end
        lifeline.background('waiter', function()
          check('running', many:wait())
          check('finished', many:wait())
        end)
        """
    #expect(try marksOf(source) == ["running:true,5000,12502500", "finished:true,5000,12502500"])
}

@Test func wait_expiredOrCancelledWork_stillAnswersFalseAndTheKind() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local long = lifeline.background('long', function() lifeline.sleep(100); return 'never' end)
          local cancelled = lifeline.background('cancelled', function() lifeline.sleep(100); return 'never' end)
          lifeline.background('waiter', function()
            lifeline.sleep(1)
            cancelled:cancel()
            local ok, err = cancelled:wait()
            mark('cancelled:' .. tostring(ok) .. ',' .. err.kind)
            local ok2, err2 = pcall(long.wait, long)
            mark('long:' .. tostring(ok2) .. ',' .. tostring(err2.kind))
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n2s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    // The waiter's own task expires with `long`'s, so its wait raises: expired.
    #expect(marks(recorder) == ["cancelled:false,cancelled", "long:false,expired"])
}

@Test func wait_valuesOutliveAFullCollection_whileThePluginKeepsTheHandle() throws {
    // Only the finished work's dead coroutine holds the table it returned; the handle holds that.
    let source = """
        local producer = lifeline.background('produce', function() return {n = 7}, 'kept' end)
        lifeline.background('late', function()
          lifeline.sleep(1)
          collectgarbage('collect')
          collectgarbage('collect')
          local ok, t, s = producer:wait()
          mark(tostring(ok) .. ',' .. t.n .. ',' .. s)
        end)
        """
    #expect(try marksOf(source) == ["true,7,kept"])
}
