import Testing

@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

// The lane chart's labels: a column as wide as the labels need, up to two fifths of the terminal,
// and labels cut where they say least, so that lanes that share a plugin and a long prefix still
// read apart.

/// A run of one plugin with a task per name, each from `t` = its index to 30 s.
private func run(plugin: String, tasks names: [String]) -> RenderedRun {
    typealias F = PictureFixtures
    var timeline: [JSONValue] = [F.event(0, "didFinishLaunching"), F.event(0, "didBecomeActive")]
    for (i, name) in names.enumerated() {
        timeline.append(
            F.event(
                Double(i), "taskBegan", ("plugin", .string(plugin)), ("task", .int(Int64(i + 1))),
                ("name", .string(name))))
    }
    for (i, name) in names.enumerated() {
        timeline.append(
            F.event(
                30, "taskEnded", ("plugin", .string(plugin)), ("task", .int(Int64(i + 1))), ("name", .string(name)),
                ("expired", .bool(false))))
    }
    return RenderedRun(title: "t", report: F.report(timeline, plugins: [plugin]))
}

/// The label column of each task row: the text before the row's first cell.
private func taskLabels(_ text: String, labelWidth: Int) -> [String] {
    text.split(separator: "\n").map { String($0.prefix(labelWidth)) }.filter { $0.hasPrefix("bg") }
        .map { $0.trimmingCharacters(in: .whitespaces) }
}

@Test(arguments: [40, 50, 60])
func laneLabels_fiveLanesOfOnePlugin_withLongNames_stayFiveDistinctAtANarrowWidth(width: Int) throws {
    let names = ["download-photos", "download-videos", "download-music", "download-documents", "download-backups"]
    let r = run(plugin: "bg-downloader", tasks: names)
    let text = LaneChart.text(r, width: width, colour: false)
    let labelWidth = LaneChart.labelWidth("bg-downloader download-documents #4".count, width: width)
    #expect(labelWidth == width * 2 / 5)
    let labels = taskLabels(text, labelWidth: labelWidth)
    #expect(labels.count == 5, "\(text)")
    #expect(Set(labels).count == 5, "\(labels)")
    // What tells them apart is kept: the word where they differ, and the task's number.
    for (i, label) in labels.enumerated() {
        #expect(label.hasSuffix("#\(i + 1)"), "\(label)")
        #expect(label.count <= labelWidth - 1)
    }
    for (label, kind) in zip(labels, ["photos", "videos", "music", "documents", "backups"]) {
        #expect(label.contains(kind), "\(label)")
    }
}

@Test func laneLabels_theOldCut_madeFiveLanesReadAlike() {
    // What the chart did at 19 characters: every label the same.
    let names = (1...5).map { "bg-downloader download-batch-of-files #\($0)" }
    let old = names.map { String($0.prefix(18)) + "~" }
    #expect(Set(old).count == 1)
    let shown = LaneChart.labels(names, room: 19)
    #expect(Set(names.compactMap { shown[$0] }).count == 5)
    #expect(names.allSatisfy { (shown[$0]?.count ?? 99) <= 19 })
    #expect(shown[names[2]] == "bg-downloader do~#3")
}

@Test func laneLabels_theColumnFitsTheLongestLabel_upToTwoFifthsOfTheWidth() {
    #expect(LaneChart.labelWidth(12, width: 100) == 13)
    #expect(LaneChart.labelWidth(60, width: 100) == 40)
    #expect(LaneChart.labelWidth(60, width: 200) == 61)
    #expect(LaneChart.labelWidth(30, width: 9) == 0)
    // A short plugin name leaves time the rest of the line.
    let text = LaneChart.text(run(plugin: "p", tasks: ["save"]), width: 80, colour: false)
    let app = text.split(separator: "\n").first { $0.hasPrefix("app ") }.map(String.init) ?? ""
    #expect(app.count == 80)
    // The longest label is "p save #1": a column of 10.
    #expect(app.hasPrefix("app" + String(repeating: " ", count: 7) + "A"), "\(app)")
}

@Test func laneLabels_cut_keepsTheDifferingWord_andTheEnd() {
    func cut(_ s: String, _ room: Int, from: Int) -> String { LaneChart.cut(Array(s), room: room, from: from) }
    // Fits: as it is.
    #expect(cut("sync #1", 10, from: 3) == "sync #1")
    // The shared start goes, from the word where it differs on.
    #expect(cut("bg-downloader download-photos #1", 19, from: 23) == "bg-downlo~photos #1")
    #expect(cut("bg-downloader download #1", 19, from: 24) == "bg-downloader do~#1")
    // What differs does not fit either: its start and its end stay.
    let long = cut("bg-downloader photos-from-the-camera-roll-2024 #1", 19, from: 14)
    #expect(long.count == 19)
    #expect(long == "~photos-from-th~ #1", "\(long)")
    #expect(long.hasSuffix(" #1"), "\(long)")
    // A label unlike any other keeps its start and its end.
    let alone = cut("offline-sync-with-a-long-name #12", 16, from: 0)
    #expect(alone.count == 16)
    #expect(alone == "offline-syn~ #12", "\(alone)")
    #expect(alone.hasSuffix("#12"), "\(alone)")
    // Tiny rooms never overflow.
    for room in 0...4 { #expect(cut("abcdefgh", room, from: 3).count <= room) }
}

@Test func laneLabels_manyLanes_areAllCutToTheRoom() {
    // Neighbours in sorted order tell how much a label shares, so the labels cost no quadratic work.
    let names = (0..<20_000).map { "plugin-with-a-long-name-\($0 % 7) operation \($0)" }
    let shown = LaneChart.labels(names, room: 20)
    #expect(shown.count == names.count)
    #expect(shown.values.allSatisfy { $0.count <= 20 })
}
