import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Background work under a task the plugin already holds: lifeline.background({task = id}, fn).
// It begins no task and ends none; it stops when that task expires, or ends, while it runs.

/// The task events of a run, as "event:task[:expired]" strings (marks left out).
private func taskEvents(_ recorder: Recorder) -> [String] {
    recorder.timeline.compactMap { e in
        guard ["taskBegan", "taskExpiring", "taskEnded"].contains(e.event), case .int(let id)? = e["task"],
            e["name"]?.stringValue?.hasPrefix("mark:") != true
        else { return nil }
        if e.event == "taskEnded", case .bool(let expired)? = e["expired"] { return "taskEnded:\(id):\(expired)" }
        return "\(e.event):\(id)"
    }
}

/// The seed's class: it observes didEnterBackground, holds one task until its queue of uploads
/// drains, and sends each upload by HTTP in a work of its own under that task.
let uploaderSource = """
    local Uploader = {}
    Uploader.__index = Uploader

    function Uploader.new(url)
      local self = setmetatable({url = url, queue = {}, running = 0, task = nil}, Uploader)
      lifeline.on("didEnterBackground", function() self:drain() end)
      return self
    end

    function Uploader:add(item) self.queue[#self.queue + 1] = item end

    -- One task for the whole queue, begun when there is work and ended when it is done.
    function Uploader:drain()
      if #self.queue == 0 then return end
      self.task = self.task or lifeline.beginBackgroundTask("uploader", function() self:stop("expired") end)
      while #self.queue > 0 do
        local item = table.remove(self.queue, 1)
        self.running = self.running + 1
        lifeline.background({task = self.task, name = "upload " .. item}, function()
          local response, err = lifeline.http.request{method = "POST", url = self.url, body = item}
          print("uploaded " .. item .. ": " .. (response and response.status or err.kind))
          self.running = self.running - 1
          if self.running == 0 then self:stop("drained") end
        end)
      end
    end

    function Uploader:stop(why)
      if self.task then
        print("uploader: " .. why .. " at " .. lifeline.now())
        lifeline.endBackgroundTask(self.task)
        self.task = nil
      end
    end

    local uploader = Uploader.new("http://127.0.0.1:8080/upload")
    for _, item in ipairs({"a", "b", "c"}) do uploader:add(item) end
    """

private func logMessages(_ recorder: Recorder) -> [String] {
    recorder.timeline.compactMap { e in e.event == "log" ? e["message"]?.stringValue : nil }
}

private func manifest(_ name: String) -> [String: String] {
    ["\(name)/plugin.toml": "[permissions]\nnetwork = [\"127.0.0.1:*\"]\n"]
}

@Test func heldTask_seedUploader_drainsItsQueueUnderOneTask() throws {
    var files = plugins(["uploader": uploaderSource])
    files.merge(manifest("uploader")) { $1 }
    let scenario = """
        0s   http POST 127.0.0.1:8080/upload -> 201 in 500ms, 201 in 1s, 201 in 2s
        0s   launch
        2s   background
        """
    let recorder = try simulate(files, scenario: scenario)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(recorder.timeline.filter { $0.event == "taskBegan" }.count == 1)
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
    #expect(
        logMessages(recorder) == ["uploaded a: 201", "uploaded b: 201", "uploaded c: 201", "uploader: drained at 4.0"])
    #expect(recorder.timeline.last?.event == "suspended")
    #expect(recorder.termination == nil)
}

@Test func heldTask_seedUploader_expiration_stopsEveryWorkAndTheHandlerEndsTheOneTask() throws {
    var files = plugins(["uploader": uploaderSource])
    files.merge(manifest("uploader")) { $1 }
    let scenario = """
        0s   http POST 127.0.0.1:8080/upload -> 201 in 1s, hang
        0s   launch
        2s   background
        """
    let recorder = try simulate(files, scenario: scenario)
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(recorder.termination == nil)
    // ios13: expiration 25 s after entering the background. The works are stopped first (their
    // requests raise `expired`, uncaught), then the class's handler ends its task.
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskExpiring:1", "taskEnded:1:true"])
    #expect(logMessages(recorder) == ["uploaded a: 201", "uploader: expired at 27.0"])
    let responses = recorder.timeline.filter { $0.event == "httpResponse" }.map { $0["error"]?.stringValue ?? "ok" }
    #expect(responses == ["ok", "expired", "expired"])
    #expect(recorder.timeline.last?.event == "suspended")
}

@Test func heldTask_beginsNoTaskAndEndsNone_theWorkRunsAndTheTaskStays() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local id = lifeline.beginBackgroundTask('mine')
          local work = lifeline.background({task = id}, function(task, a, b)
            mark('args:' .. tostring(task.id == id) .. ',' .. a .. ',' .. b)
            lifeline.sleep(2)
            return 'done'
          end, 'x', 'y')
          mark('same id:' .. tostring(work.id == id))
          lifeline.background('after', function()
            local ok, value = work:wait()
            mark('waited:' .. tostring(ok) .. ',' .. value .. ' at ' .. lifeline.now())
            lifeline.sleep(1)
            lifeline.endBackgroundTask(id)
          end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["same id:true", "args:true,x,y", "waited:true,done at 3.0"])
    // Task 1 is the plugin's; task 3 is 'after''s own (2 was a mark). The work under task 1 ended
    // none of them.
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskBegan:3", "taskEnded:1:false", "taskEnded:3:false"])
    let ended = recorder.timeline.filter { $0.event == "taskEnded" && $0["name"]?.stringValue?.hasPrefix("mark:") != true }
    #expect(ended.map { ReportNumber.seconds($0.time) } == ["4", "4"])
}

@Test func heldTask_endedWhileTheWorkWaits_theWaitRaisesACancellation_whenTheAppRunsAgain() throws {
    let source = """
        lifeline.on('didEnterBackground', function()
          local id = lifeline.beginBackgroundTask('mine')
          local work = lifeline.background({task = id}, function()
            local ok, err = pcall(lifeline.sleep, 100)
            mark(tostring(ok) .. ',' .. err.kind .. ',' .. tostring(err) .. ' at ' .. lifeline.now())
          end)
          lifeline.after(3, function() lifeline.endBackgroundTask(id) end)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background\n10s foreground")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    // No task is left at 4 s, so the app suspends then, as iOS would, with the work's
    // cancellation queued: it reaches the work when the app runs again.
    #expect(marks(recorder) == ["false,cancelled,background task 1 ended at 10.0"])
    #expect(taskEvents(recorder) == ["taskBegan:1", "taskEnded:1:false"])
    let suspended = recorder.timeline.first { $0.event == "suspended" }
    #expect(suspended.map { ReportNumber.seconds($0.time) } == "4")
}

@Test func heldTask_theWorkEndsItsOwnTaskAndReturns_returnsNormally() throws {
    let source = """
        local id = lifeline.beginBackgroundTask('mine')
        local work = lifeline.background({task = id}, function()
          lifeline.sleep(1)
          lifeline.endBackgroundTask(id)
          return 'fine'
        end)
        lifeline.background('check', function()
          local ok, value = work:wait()
          mark(tostring(ok) .. ',' .. tostring(value))
        end)
        """
    #expect(try marksOf(source) == ["true,fine"])
}

@Test func heldTask_alreadyExpiring_fnNeverRuns() throws {
    let source = """
        local id
        id = lifeline.beginBackgroundTask('mine', function()
          local work = lifeline.background({task = id}, function() mark('never') end)
          mark('done:' .. tostring(work:done()))
          -- A finished work's wait answers at once, from anywhere.
          local ok, err = work:wait()
          mark('wait:' .. tostring(ok) .. ',' .. err.kind)
          lifeline.endBackgroundTask(id)
        end)
        """
    let recorder = try simulate(plugins(["p": source]), scenario: "0s launch\n1s background")
    #expect(recorder.pluginErrorCount == 0, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["done:true", "wait:false,expired"])
}

@Test func heldTask_cancelOneWork_theOtherAndTheTaskGoOn() throws {
    let source = """
        local id = lifeline.beginBackgroundTask('mine')
        local a = lifeline.background({task = id, name = 'a'}, function() lifeline.sleep(5); return 'a' end)
        local b = lifeline.background({task = id, name = 'b'}, function() lifeline.sleep(2); return 'b' end)
        lifeline.background('check', function()
          a:cancel()
          mark('a:' .. table.concat({tostring(a:wait())}, ','))
          local ok, v = b:wait()
          mark('b:' .. tostring(ok) .. ',' .. v .. ' at ' .. lifeline.now())
          mark('task still active:' .. tostring(lifeline.endBackgroundTask(id)))
        end)
        """
    #expect(try marksOf(source) == ["a:false", "b:true,b at 2.0", "task still active:true"])
}

@Test func heldTask_badTask_isRefusedWithAClearMessage() throws {
    let cases: [(String, String)] = [
        ("lifeline.background({task = 99}, function() end)",
         "bad argument #1 to 'lifeline.background' (task 99 is not an active background task of this plugin"),
        ("local id = lifeline.beginBackgroundTask(); lifeline.endBackgroundTask(id); lifeline.background({task = id}, function() end)",
         "task 1 is not an active background task of this plugin"),
        ("lifeline.background({task = 1.5}, function() end)",
         "field 'task' must be a background task's id (an integer > 0)"),
        ("lifeline.background({task = 'one'}, function() end)",
         "field 'task' must be a background task's id (an integer > 0)"),
        ("lifeline.background({name = 5}, function() end)", "field 'name' must be a string"),
        ("lifeline.background(5, function() end)", "string or table expected, got number"),
    ]
    for (code, expected) in cases {
        let source = "local ok, err = pcall(function() \(code) end); mark(tostring(ok) .. ':' .. tostring(err))"
        let got = try marksOf(source)
        #expect(got.count == 1 && got[0].hasPrefix("false:") && got[0].contains(expected), "\(code): \(got)")
    }
}

@Test func heldTask_anotherPluginsTask_isRefused() throws {
    // Plugins load in name order: 'a' begins task 1; 'b' may not run work under it.
    let files = plugins([
        "a": "lifeline.beginBackgroundTask('a-task')",
        "b": "local ok, err = pcall(lifeline.background, {task = 1}, function() end); mark(tostring(ok) .. ':' .. tostring(err))",
    ])
    let recorder = try simulate(files)
    #expect(marks(recorder).count == 1)
    #expect(marks(recorder).first?.contains("false:") == true)
    #expect(marks(recorder).first?.contains("task 1 is not an active background task of this plugin") == true)
}
