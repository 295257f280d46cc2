import Foundation
import Testing

/// `lifeline run --record FILE` refuses a FILE it cannot write before anything runs, with the
/// exit codes of any output file: 64 for no file at all, 70 for one that cannot be made.
@Suite struct RecordRunTests {
    @Test func recordingToNoFile_isUsage() throws {
        let ws = try Workspace()
        try ws.plugin("a", "print('never')")
        for file in ["", "-"] {
            let result = try CLI.run(["run", "--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--record", file])
            #expect(result.status == 64, "\(file): \(result.stderr)")
            #expect(result.stderr.contains("--record takes a file"))
        }
    }

    @Test func recordingIntoTheReportsFile_isUsage() throws {
        let ws = try Workspace()
        try ws.plugin("a", "print('never')")
        let result = try CLI.run([
            "run", "--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--record", ws.path + "/out",
            "--report", ws.path + "/./out",
        ])
        #expect(result.status == 64, "\(result.stderr)")
        #expect(result.stderr.contains("--record and --report name one file"))
    }

    @Test func recordingWhereItCannotBeWritten_isExit70_andRunsNothing() throws {
        let ws = try Workspace()
        try ws.plugin("a", "print('never')")
        try ws.file("taken.scenario.d", "a file where the bodies' folder goes")
        let cases = [
            (ws.path + "/no-such-folder/r.scenario", "there is no folder"),
            (ws.path, "it is a folder"),
            (ws.path + "/taken.scenario", "taken.scenario.d"),
        ]
        for (file, says) in cases {
            let result = try CLI.run(["run", "--plugins", ws.plugins, "--state-dir", ws.path + "/state", "--record", file])
            #expect(result.status == 70, "\(file): \(result.stderr)")
            #expect(result.stderr.contains(says), "\(result.stderr)")
            #expect(!result.stderr.contains("never"))
        }
    }
}
