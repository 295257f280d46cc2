import Foundation
import Testing

@testable import Lifeline

// The report's event names are declared once, in ReportEventName.swift. The compiler holds the
// call sites to those declarations; these tests hold the declarations to the table of fields
// (`ReportEvents.fields`), which `expect` lines, LIFELINE_CHECK_EVENTS and docs/report.md use.

/// One `public static var NAME: Self { Self(…) }` line of ReportEventName.swift: the property's
/// name and what it is made of, a string or a `LifecycleEventName` case.
private struct Declaration {
    var property: String
    var value: String
    var fromLifecycle: Bool
}

/// Every name ReportEventName.swift declares, read from its source: a property cannot be listed
/// at run time, and a name declared there but left out of the table would otherwise be found
/// only when it is recorded under LIFELINE_CHECK_EVENTS.
private func declarations() throws -> (declared: [Declaration], propertyLines: Int) {
    let file = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Sources/Lifeline/Report/ReportEventName.swift")
    let text = try String(contentsOf: file, encoding: .utf8)
    var declared: [Declaration] = []
    var propertyLines = 0
    for line in text.split(separator: "\n").map({ $0.trimmingCharacters(in: .whitespaces) })
    where line.hasPrefix("public static ") && !line.hasPrefix("public static var all:") {
        propertyLines += 1
        let rest = line.dropFirst("public static var ".count)
        guard let colon = rest.firstIndex(of: ":") else { continue }
        let property = String(rest[..<colon])
        let body = rest[colon...]
        if let open = body.range(of: "{ Self(\""), let close = body.range(of: "\") }") {
            let value = String(body[open.upperBound..<close.lowerBound])
            declared.append(Declaration(property: property, value: value, fromLifecycle: false))
        } else if let open = body.range(of: "{ Self(LifecycleEventName."), let close = body.range(of: ") }") {
            let value = String(body[open.upperBound..<close.lowerBound])
            declared.append(Declaration(property: property, value: value, fromLifecycle: true))
        }
    }
    return (declared, propertyLines)
}

@Suite struct ReportEventNameTests {
    @Test func everyDeclaredName_isInTheTable_andEveryNameInTheTableIsDeclared() throws {
        let (declared, propertyLines) = try declarations()
        // Every name property was understood: none is skipped because it is written another way.
        #expect(declared.count == propertyLines)
        #expect(declared.count > 40)
        let names = declared.map(\.value)
        #expect(Set(names).count == names.count, "a name is declared twice")
        #expect(Set(declared.map(\.property)).count == declared.count, "a property is declared twice")
        for missing in Set(names).subtracting(ReportEvents.fields.keys).sorted() {
            Issue.record("\(missing) is declared but has no row in ReportEvents.fields")
        }
        for undeclared in Set(ReportEvents.fields.keys).subtracting(names).sorted() {
            Issue.record("\(undeclared) is in ReportEvents.fields but not declared in ReportEventName")
        }
        #expect(ReportEventName.all.map(\.rawValue) == ReportEvents.names)
    }

    /// `static var taskBegan` is the event "taskBegan": a property named for one event cannot
    /// record another.
    @Test func eachPropertyIsNamedForItsEvent() throws {
        for d in try declarations().declared {
            #expect(d.property == d.value, "\(d.property) declares \(d.value)")
        }
    }

    /// The lifecycle notifications are declared from `LifecycleEventName`, every one of them, and
    /// no host event spells one again.
    @Test func lifecycleNotifications_comeFromLifecycleEventName() throws {
        let declared = try declarations().declared
        let fromLifecycle = declared.filter(\.fromLifecycle).map(\.value)
        #expect(fromLifecycle.sorted() == LifecycleEventName.allCases.map(\.rawValue).sorted())
        let spelt = Set(declared.filter { !$0.fromLifecycle }.map(\.value))
        #expect(spelt.isDisjoint(with: LifecycleEventName.allCases.map(\.rawValue)))
        for name in LifecycleEventName.allCases {
            #expect(ReportEventName(name).rawValue == name.rawValue)
            #expect(ReportEvents.fields[ReportEventName(name).rawValue] != nil, "\(name)")
        }
    }

    /// The compact kinds of the timeline's log write names of the table.
    @Test func theTimelineLogsKinds_areNamesOfTheTable() {
        for kind in TimelineStore.Kind.allCases where kind != .general {
            #expect(ReportEvents.fields[kind.name] != nil, "\(kind)")
        }
    }

    /// An event made from a declared name is the event made from its string, as the report
    /// writes it and `expect` reads it.
    @Test func anEventMadeFromAName_isTheEventMadeFromItsString() {
        let fields: [(String, JSONValue)] = [("reason", .string("fetch"))]
        let named = TimelineEvent(time: .seconds(2), event: .relaunch, fields: fields)
        let spelt = TimelineEvent(time: .seconds(2), event: "relaunch", fields: fields)
        #expect(named.event == "relaunch")
        #expect(named.json.serialized() == spelt.json.serialized())
        #expect(named.name == .relaunch)
        #expect(ReportEvents.admits(named))
        // A name this version does not know is kept as it is, and is not admitted.
        let unknown = TimelineEvent(time: .seconds(2), event: "relanch")
        #expect(unknown.name.rawValue == "relanch")
        #expect(unknown.name != .relaunch)
        #expect(!ReportEvents.admits(unknown))
    }
}
