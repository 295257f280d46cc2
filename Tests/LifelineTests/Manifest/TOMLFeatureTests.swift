import Testing

@testable import Lifeline
@testable import LifelineRules

// Multi-line strings, arrays of tables, comments and file encoding: what the toml-test corpus
// showed the reader needed, each with the line its errors point at.

private func parse(_ text: String) throws(LifelineError) -> TOMLTable { try TOML.parse(text, fileName: "file.toml") }

private func parseError(_ text: String) -> String? {
    do {
        _ = try parse(text)
        return nil
    } catch {
        return error.message
    }
}

@Suite struct TOMLFeatureTests {
    @Test func multiLineBasicString_dropsTheFirstNewLine_decodesEscapes_andJoinsBackslashLines() throws {
        let table = try parse("a = \"\"\"\none\\t\"two\"\r\nthree \\\n     four\"\"\"\nb = 1")
        #expect(table["a"] == .string("one\t\"two\"\nthree four"))
        #expect(table.line(of: "b") == 5)
    }

    @Test func multiLineLiteralString_keepsBackslashes_andMayEndWithQuotes() throws {
        let table = try parse("a = '''\nC:\\x\\n'''\nb = '''it''''\nc = \"\"\"\"\"x\"\"\"\"\"")
        #expect(table["a"] == .string("C:\\x\\n"))
        #expect(table["b"] == .string("it'"))
        #expect(table["c"] == .string("\"\"x\"\""))
    }

    @Test(arguments: [
        ("a = \"\"\"\nabc", "file.toml:2: unterminated multi-line string (opened on line 1)"),
        ("a = '''\n\nx''''''", "file.toml:3: too many quotes (6)"),
        ("a = \"\"\"\n\\q\"\"\"", "file.toml:2: invalid escape '\\q'"),
        ("a = \"\"\"\nx\u{01}\"\"\"", "file.toml:2: control character"),
        ("a = '''\nx\ry'''", "file.toml:2: control character '\\r'"),
    ])
    func multiLineString_errors_pointAtTheirLine(text: String, expected: String) {
        #expect(parseError(text)?.hasPrefix(expected) == true, "\(parseError(text) ?? "parsed")")
    }

    @Test func arrayOfTables_makesAnArrayOfTables_withSubtablesInTheLastOne() throws {
        let table = try parse("""
            [[fruit]]
            name = "apple"
            [fruit.color]
            red = true
            [[fruit.variety]]
            name = "gala"
            [[fruit]]
            name = "pear"
            """)
        let expected: TOMLValue = .array([
            .table(TOMLTable([
                ("name", .string("apple"), 2), ("color", .table(TOMLTable([("red", .bool(true), 4)])), 3),
                ("variety", .array([.table(TOMLTable([("name", .string("gala"), 6)]))]), 5),
            ])),
            .table(TOMLTable([("name", .string("pear"), 8)])),
        ])
        #expect(table["fruit"] == expected)
        #expect(table.line(of: "fruit") == 1)
    }

    @Test(arguments: [
        ("a = []\n[[a]]", "file.toml:2: [[a]] adds to an array of tables, but 'a' is a value (line 1)"),
        ("[a]\n[[a]]", "file.toml:2: [[a]] adds to an array of tables, but [a] is a table (line 1)"),
        ("[[a]]\n[a]", "file.toml:2: [[a]] (line 1) is an array of tables; [a] cannot also be a table"),
        ("[[t.a]]\n[t]\na.x = 1", "file.toml:3: [[a]] (line 1) is an array of tables"),
        ("[[a]", "file.toml:1: expected ']]' to close [[a, found end of file"),
        ("[[a] ]", "file.toml:1: expected ']]' to close [[a, found ' '"),
    ])
    func arrayOfTables_errors_pointAtTheirLine(text: String, expected: String) {
        #expect(parseError(text)?.hasPrefix(expected) == true, "\(parseError(text) ?? "parsed")")
    }

    @Test(arguments: ["\u{00}", "\u{1F}", "\u{7F}", "\r"])
    func controlCharacterInComment_failsWithLine(character: String) {
        #expect(parseError("a = 1\n# x\(character)y\n")?.hasPrefix("file.toml:2: control character") == true)
    }

    @Test func underscoreRightAfterTheRadixPrefix_fails() {
        #expect(parseError("a = 0b_1")?.hasPrefix("file.toml:1: misplaced '_'") == true)
        #expect(parseError("a = 0x_ff")?.hasPrefix("file.toml:1: misplaced '_'") == true)
    }

    @Test func bytes_oneByteOrderMarkIsSkipped_aSecondOneIsAnError() throws {
        let bom: [UInt8] = [0xEF, 0xBB, 0xBF]
        #expect(try TOML.parse(utf8: bom + Array("a = 1".utf8), fileName: "f.toml")["a"] == .integer(1))
        #expect(throws: LifelineError.self) {
            try TOML.parse(utf8: bom + bom + Array("a = 1".utf8), fileName: "f.toml")
        }
    }

    @Test func bytes_thatAreNotUTF8_failAtTheLineOfTheFirstBadByte() {
        #expect {
            try TOML.parse(utf8: Array("a = 1\nb = 'ok'\nc = '".utf8) + [0xFF, 0x27], fileName: "f.toml")
        } throws: { error in
            (error as? LifelineError)?.message == "f.toml:3: the file is not valid UTF-8"
        }
    }
}
