import Foundation
import Lifeline

/// `lifeline ctl`'s line, as the control socket reads it (`ControlListener.serve`) and the run
/// turns it into a step (`LiveRun.answer`): the first line, at most `ControlSocket.maxLineBytes`,
/// a `\r` before its end dropped, refused unless UTF-8, trimmed, refused with a control character,
/// then `Step.parse`. Those first checks are private to the run, so they are restated here, and
/// the parser gets the same text the run hands it.
///
/// What parses must name itself: the step's description (what the run echoes, and what a
/// scenario line says) parses back to the same step. Then the step is carried out, as the run
/// would, on a launched app with a plugin that completes what it is asked to.
enum ControlLine {
    static func fuzz(_ bytes: UnsafeRawBufferPointer) {
        var line = Array(bytes.prefix { $0 != UInt8(ascii: "\n") })
        guard line.count <= ControlSocket.maxLineBytes else { return }
        if line.last == UInt8(ascii: "\r") { line.removeLast() }
        guard let text = String(validating: line, as: UTF8.self) else { return }
        let action = text.trimmingCharacters(in: .whitespaces)
        guard !action.isEmpty else { return }
        if action.unicodeScalars.contains(where: { ($0.value < 0x20 && $0 != "\t") || (0x7F..<0xA0).contains($0.value) }) {
            return
        }
        let parsed: Step?
        do {
            parsed = try Step.parse(Substring(action))
        } catch {
            return
        }
        guard let step = parsed else { return }
        let again: Step?
        do {
            again = try Step.parse(Substring(step.description))
        } catch {
            fatalError("ctl: '\(action)' became \(step), whose description '\(step.description)' is refused: \(error.message)")
        }
        guard again == step else {
            fatalError("ctl: '\(action)' became \(step), whose description reads back as \(String(describing: again))")
        }
        var program = LuaAPI.Program()
        program.groups[0].lines = completing
        program.groups.append((0, completing))
        program.steps = [(step, 0), (nil, 1)]
        LuaAPI.harness.run(program)
    }

    /// A plugin that does what the system asks: completes fetches, pushes and transfer events,
    /// ends its tasks, and has a task request pending for `run-tasks`.
    static let completing = [
        "keep(pcall(lifeline.on, 'performFetch', function(e) e.complete('newData') end))",
        "keep(pcall(lifeline.on, 'didReceiveRemoteNotification', function(e) e.complete('noData') end))",
        "keep(pcall(lifeline.on, 'didFinishTransferEvents', function(e) e.complete() end))",
        "keep(pcall(lifeline.tasks.submit, {identifier = 'fz.refresh', kind = 'refresh'}))",
        "keep(pcall(function() if type(E) == 'table' and E.setTaskCompleted then E:setTaskCompleted(true) end end))",
    ]
}
