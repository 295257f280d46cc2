import Foundation
import Testing

@testable import Lifeline
@testable import LifelineLua
import LifelineTesting

// Strings cross between Lua and Swift with all their bytes, or are refused with a clear error.

@Test func config_keysAndValuesWithNUL_keepTheirBytes() throws {
    let files = [
        "p/init.lua": markPrelude + """
            local c = lifeline.config
            mark(c['a\\0x'] .. ',' .. c['a\\0y'] .. ',' .. tostring(c.a) .. ',' .. #c.v .. ',' .. (c.v == 'one\\0two' and 'same' or 'cut'))
            """,
        "p/plugin.toml": """
            [config]
            "a\\u0000x" = "1"
            "a\\u0000y" = "2"
            v = "one\\u0000two"
            """,
    ]
    let recorder = try simulate(files)
    #expect(pluginErrors(recorder).isEmpty, "\(pluginErrors(recorder))")
    #expect(marks(recorder) == ["1,2,nil,7,same"])
}

@Test func taskNames_keepNULBytes_intoTheReport() throws {
    let recorder = try simulate(plugins(["p": "lifeline.endBackgroundTask(lifeline.beginBackgroundTask('up\\0load'))"]))
    let names = recorder.timeline.compactMap { $0.event == "taskBegan" ? $0["name"]?.stringValue : nil }
    #expect(names == ["up\u{0}load"])
}

@Test func namesThatAreNotUTF8OrTooLong_areRefusedNotChanged() throws {
    let source = """
        mark(select(2, pcall(lifeline.beginBackgroundTask, '\\xff\\xfe')))
        mark(select(2, pcall(lifeline.background, string.rep('n', 1025), function() end)))
        mark(select(2, pcall(lifeline.queue, 'q\\xc3')))
        """
    let result = try marksOf(source)
    #expect(result.count == 3)
    #expect(result[0].contains("bad argument #1 to 'lifeline.beginBackgroundTask' (a name must be UTF-8 text)"), "\(result)")
    #expect(result[1].contains("a name is at most 1024 bytes long"), "\(result)")
    #expect(result[2].contains("a queue's name must be UTF-8 text"), "\(result)")
}

@Test func errorMessages_keepTheNULBytesOfWhatTheyQuote() throws {
    let result = try marksOf("mark(select(2, pcall(lifeline.on, 'did\\0Launch', function() end)))")
    #expect(result.first?.contains("unknown event 'did\u{0}Launch'") == true, "\(result)")
}

@Test func transferIdsWithNUL_areRefusedClearly() throws {
    let source = """
        mark(select(2, pcall(lifeline.transfers.download, {url = 'http://127.0.0.1:9/x', to = 'f', id = 'a\\0b'})))
        mark(select(2, pcall(lifeline.transfers.download, {url = 'http://127.0.0.1:9/x', to = 'f\\0g'})))
        """
    var files = plugins(["p": source])
    files["p/plugin.toml"] = "[permissions]\nnetwork = [\"127.0.0.1:9\"]\n"
    let recorder = try withDatabase { try simulate(files, database: $0) }
    let result = marks(recorder)
    #expect(result.first?.contains("a transfer's id must not contain a NUL byte") == true, "\(result) \(pluginErrors(recorder))")
    #expect(result.last?.contains("a transfer's file name must not contain a NUL byte") == true, "\(result)")
}

@Test func httpHeadersThatCouldSplitALine_areRefused() throws {
    let source = """
        lifeline.background(nil, function()
          mark(select(2, pcall(lifeline.http.request, {url = 'http://127.0.0.1:9/', headers = {['x-a'] = 'v\\r\\nx-b: injected'}})))
          mark(select(2, pcall(lifeline.http.request, {url = 'http://127.0.0.1:9/', headers = {['x a'] = 'v'}})))
          mark(select(2, pcall(lifeline.http.request, {url = 'http://127.0.0.1:9/', headers = {['x-a'] = 'v\\0'}})))
        end)
        """
    let result = try marksOf(source)
    #expect(result.count == 3)
    for message in result { #expect(message.contains("is not a valid header line"), "\(message)") }
}
