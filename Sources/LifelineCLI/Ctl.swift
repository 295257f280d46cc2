import ArgumentParser
import Foundation
import Lifeline

struct Ctl: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Send one step to a running `lifeline run`, as a scenario line would.",
        discussion: """
            Example:
              lifeline run --plugins plugins --state-dir /tmp/lifeline &
              lifeline ctl --state-dir /tmp/lifeline background
              lifeline ctl --state-dir /tmp/lifeline fetch
              lifeline ctl --state-dir /tmp/lifeline push '{"feed":"news"}'
              lifeline ctl --state-dir /tmp/lifeline run-tasks refresh
              lifeline ctl --state-dir /tmp/lifeline charging on
              lifeline ctl --state-dir /tmp/lifeline terminate

            The actions are those of a scenario line: background, foreground,
            resign, activate, memory-warning, terminate, kill, force-quit, fetch,
            push [JSON], run-tasks [refresh|processing|IDENTIFIER],
            charging on|off, network on|off, reload, reload all. The words after
            the options are joined with spaces.

            The run listens on <state-dir>/control.sock (owner only). It answers
            one line: `ok` (printed on stdout) once the step is carried out, or
            `error: MESSAGE` (on stderr) when it is unknown, its argument is bad,
            the profile lacks it, or the app's state does not allow it.

            Exit codes:
              0    ok
              64   bad usage (no action given)
              65   the run answered an error, or no run listens in the state dir
              70   the run gave no answer, or the socket failed
            """
    )

    @Option(help: "The state dir of the run to drive (default: ~/.local/state/lifeline).")
    var stateDir: String?

    @Option(help: "How long to wait for the run's answer, in seconds.")
    var timeout: Double = 60

    @Argument(parsing: .remaining, help: "The action, as a scenario line writes it: fetch, push JSON, charging on, ...")
    var action: [String] = []

    func validate() throws {
        guard !action.isEmpty else { throw ValidationError("no action given; for example: lifeline ctl fetch") }
        guard timeout > 0, timeout <= 86_400 else {
            throw ValidationError("--timeout takes a number of seconds above 0, at most 86400 (a day)")
        }
    }

    func run() throws {
        let stateDirectory = stateDir ?? LiveRun.defaultStateDirectory
        let answer: String
        do {
            answer = try ControlSocket.send(action.joined(separator: " "), stateDirectory: stateDirectory, timeout: timeout)
        } catch {
            FileHandle.standardError.write(Data("lifeline ctl: \(Terminal.safe(error.message))\n".utf8))
            throw ExitCode(error.exitCode)
        }
        if answer == "ok" {
            print(answer)
            return
        }
        FileHandle.standardError.write(Data("\(Terminal.safe(answer))\n".utf8))
        throw ExitCode(65)
    }
}
