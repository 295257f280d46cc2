import Testing
@testable import Lifeline
@testable import LifelineRules
import LifelineTesting

/// Parses `text` as file.toml.
private func parse(_ text: String) throws(LifelineError) -> TOMLTable {
    try TOML.parse(text, fileName: "file.toml")
}

/// The message parsing `text` fails with, or nil when it parses.
private func parseError(_ text: String) -> String? {
    do {
        _ = try parse(text)
        return nil
    } catch {
        return error.message
    }
}

/// The message parsing `text` as a manifest fails with, or nil when it parses.
private func manifestError(_ text: String, maximumMemoryLimit: Int = PluginManifest.maximumMemoryLimit) -> String? {
    do {
        _ = try PluginManifest.parse(text, fileName: "file.toml", maximumMemoryLimit: maximumMemoryLimit)
        return nil
    } catch {
        return error.message
    }
}

private let kiB = 1024
private let miB = 1024 * 1024
private let giB = 1024 * 1024 * 1024

// MARK: - Values

@Test func parse_basicString_decodesEscapes() throws {
    let table = try parse(#"s = "q\" b\\ n\n t\t r\r u\u00E9 U\U0001F600""#)
    #expect(table["s"] == .string("q\" b\\ n\n t\t r\r u\u{E9} U\u{1F600}"))
}

@Test func parse_literalString_keepsBackslashesAsWritten() throws {
    let table = try parse(#"path = 'C:\Users\n'"#)
    #expect(table["path"] == .string(#"C:\Users\n"#))
}

@Test func parse_emptyStrings_areEmpty() throws {
    let table = try parse("a = \"\"\nb = ''")
    #expect(table["a"] == .string(""))
    #expect(table["b"] == .string(""))
}

@Test(arguments: [
    ("1", 1), ("+42", 42), ("-17", -17), ("0", 0), ("1_000_000", 1_000_000), ("0xFF", 255),
    ("0xdead_beef", 0xdead_beef), ("0o755", 0o755), ("0b1010", 10),
    ("9223372036854775807", Int64.max), ("-9223372036854775808", Int64.min),
] as [(String, Int64)])
func parse_integer_readsSignsSeparatorsAndHex(text: String, expected: Int64) throws {
    #expect(try parse("n = \(text)")["n"] == .integer(expected))
}

@Test(arguments: [
    ("1.5", 1.5), ("-0.25", -0.25), ("+3.0", 3.0), ("1e3", 1000), ("6.626e-34", 6.626e-34), ("2E+2", 200),
    ("1_000.5", 1000.5), ("inf", .infinity), ("+inf", .infinity), ("-inf", -.infinity),
] as [(String, Double)])
func parse_float_readsFractionsExponentsAndInfinity(text: String, expected: Double) throws {
    #expect(try parse("x = \(text)")["x"] == .float(expected))
}

@Test(arguments: ["nan", "+nan", "-nan"])
func parse_nan_isFloatNaN(text: String) throws {
    let value = try parse("x = \(text)")["x"]
    guard case .float(let double) = value else {
        Issue.record("expected a float, got \(String(describing: value))")
        return
    }
    #expect(double.isNaN)
}

@Test func parse_booleans_areBools() throws {
    let table = try parse("yes = true\nno = false")
    #expect(table["yes"] == .bool(true))
    #expect(table["no"] == .bool(false))
}

@Test func parse_array_holdsMixedAndNestedValues() throws {
    let table = try parse(#"a = [1, "two", 3.5, [true, []], { k = 1 }]"#)
    #expect(table["a"] == .array([
        .integer(1), .string("two"), .float(3.5), .array([.bool(true), .array([])]),
        .table(TOMLTable([("k", .integer(1), 1)])),
    ]))
}

@Test func parse_multiLineArray_allowsCommentsBlankLinesAndTrailingComma() throws {
    let text = """
        hosts = [
            "a:1",  # first

            "b:2", # second
        ]
        after = 1
        """
    let table = try parse(text)
    #expect(table["hosts"] == .array([.string("a:1"), .string("b:2")]))
    #expect(table.line(of: "after") == 6)
}

@Test func parse_inlineTable_keepsKeysInOrder() throws {
    let table = try parse(#"t = { b = 1, a = "x", c.d = true }"#)
    guard case .table(let inner) = table["t"] else {
        Issue.record("expected a table")
        return
    }
    #expect(inner.keys == ["b", "a", "c"])
    #expect(inner["a"] == .string("x"))
    #expect(inner["c"] == .table(TOMLTable([("d", .bool(true), 1)])))
}

@Test func parse_emptyInlineTable_isEmptyTable() throws {
    #expect(try parse("t = {}")["t"] == .table(TOMLTable()))
}

// MARK: - Structure

@Test func parse_tableHeaders_nestTablesAndRecordLines() throws {
    let text = """
        top = 1

        [server]
        port = 80

        [server.tls]
        enabled = true
        """
    let table = try parse(text)
    #expect(table.keys == ["top", "server"])
    #expect(table.line(of: "server") == 3)
    guard case .table(let server) = table["server"], case .table(let tls) = server["tls"] else {
        Issue.record("expected nested tables")
        return
    }
    #expect(server["port"] == .integer(80))
    #expect(server.line(of: "port") == 4)
    #expect(server.line(of: "tls") == 6)
    #expect(tls["enabled"] == .bool(true))
}

@Test func parse_implicitTable_mayBeDefinedAfterItsChild() throws {
    let table = try parse("[a.b]\nx = 1\n[a]\ny = 2")
    guard case .table(let a) = table["a"] else {
        Issue.record("expected a table")
        return
    }
    #expect(a.keys == ["b", "y"])
    #expect(table.line(of: "a") == 3)
}

@Test func parse_dottedKeys_makeNestedTables() throws {
    let table = try parse("a.b = 1\na.c = \"x\"")
    #expect(table["a"] == .table(TOMLTable([("b", .integer(1), 1), ("c", .string("x"), 2)])))
}

@Test func parse_quotedKeys_mayHoldAnyCharacters() throws {
    let table = try parse(#""a b.c" = 1"# + "\n'lit' = 2")
    #expect(table.keys == ["a b.c", "lit"])
}

@Test func parse_keys_keepTheOrderTheyWereWritten() throws {
    #expect(try parse("z = 1\na = 2\nm = 3").keys == ["z", "a", "m"])
}

@Test func parse_comments_areIgnoredExceptInsideStrings() throws {
    let text = """
        # a comment
           # an indented one
        a = "x # not a comment" # a comment
        [t] # after a header
        """
    let table = try parse(text)
    #expect(table["a"] == .string("x # not a comment"))
    #expect(table["t"] == .table(TOMLTable()))
}

@Test func parse_crlfLineEndings_countLines() throws {
    let table = try parse("a = 1\r\n\r\nb = 2\r\n")
    #expect(table.line(of: "b") == 3)
}

@Test func parse_emptyText_isEmptyTable() throws {
    #expect(try parse("") == TOMLTable())
}

@Test func tableEquality_ignoresLines() {
    #expect(TOMLTable([("a", .integer(1), 1)]) == TOMLTable([("a", .integer(1), 9)]))
    #expect(TOMLTable([("a", .integer(1), 1)]) != TOMLTable([("a", .integer(2), 1)]))
}

// MARK: - Rejections

@Test func parse_duplicateKey_failsWithLine() {
    let message = parseError("a = 1\nb = 2\na = 3")
    #expect(message?.contains("file.toml:3: duplicate key 'a' (first defined on line 1)") == true)
}

@Test func parse_duplicateKeyInInlineTable_failsWithLine() {
    #expect(parseError("\nt = { a = 1, a = 2 }")?.contains("file.toml:2: duplicate key 'a'") == true)
}

@Test func parse_tableDefinedTwice_failsWithLine() {
    let message = parseError("[a]\nx = 1\n[b]\n[a]")
    #expect(message?.contains("file.toml:4: table [a] is defined twice (first on line 1)") == true)
}

@Test func parse_tableAlsoDefinedByDottedKeys_failsWithLine() {
    #expect(parseError("a.b = 1\n[a]")?.contains("file.toml:2: table [a] is defined twice") == true)
}

@Test func parse_valueThenTableOfSameKey_failsWithLine() {
    let message = parseError("a = 1\n[a]")
    #expect(message?.contains("file.toml:2: key 'a' is both a value (line 1) and a table") == true)
}

@Test func parse_valueThenDottedKeyThroughIt_failsWithLine() {
    #expect(parseError("a = 1\na.b = 2")?.contains("file.toml:2: key 'a' is both a value") == true)
}

@Test func parse_headerIntoInlineTable_failsWithLine() {
    #expect(parseError("a = {}\n[a.b]")?.contains("file.toml:2: inline table 'a' (line 1) cannot be extended") == true)
}

@Test func parse_dottedKeyIntoHeaderTable_failsWithLine() {
    let message = parseError("[a.b]\n[a]\nb.c = 1")
    #expect(message?.contains("file.toml:3: table [b] (line 1) cannot be extended with dotted keys") == true)
}

@Test func parse_unterminatedString_failsWithLine() {
    #expect(parseError("a = 1\nb = \"open\nc = 2")?.contains("file.toml:2: unterminated string") == true)
}

@Test func parse_unterminatedLiteralString_failsWithLine() {
    #expect(parseError("b = 'open")?.contains("file.toml:1: unterminated string") == true)
}

@Test func parse_unterminatedArray_failsWithOpeningLine() {
    let message = parseError("x = 0\na = [1,\n  2,\n")
    #expect(message?.contains("file.toml:2: unterminated array (opened on line 2)") == true)
}

@Test func parse_arrayRunningIntoNextKey_failsWithLine() {
    let message = parseError("a = [1, 2\nb = 3")
    #expect(message?.contains("file.toml:2: expected ',' or ']' in the array opened on line 1, found 'b'") == true)
}

@Test func parse_unterminatedInlineTable_failsWithLine() {
    #expect(parseError("t = { a = 1\n}")?.contains("file.toml:1: unterminated inline table") == true)
}

@Test func parse_missingEquals_failsWithLine() {
    #expect(parseError("a = 1\nname \"x\"")?.contains("file.toml:2: expected '=' after key 'name'") == true)
}

@Test func parse_bareKeyAlone_failsWithLine() {
    #expect(parseError("\n\njust_a_key")?.contains("file.toml:3: expected '=' after key 'just_a_key'") == true)
}

@Test func parse_missingValue_failsWithLine() {
    #expect(parseError("a = 1\nb =   # nothing")?.contains("file.toml:2: missing value for key 'b'") == true)
}

@Test func parse_garbageAfterValue_failsWithLine() {
    let message = parseError("a = 1\nb = \"x\" junk")
    #expect(message?.contains("file.toml:2: unexpected 'j' after the value") == true)
}

@Test func parse_garbageAfterTableHeader_failsWithLine() {
    #expect(parseError("[a] b = 1")?.contains("file.toml:1: unexpected 'b' after the table header") == true)
}

@Test func parse_unclosedTableHeader_failsWithLine() {
    #expect(parseError("\n[a")?.contains("file.toml:2: expected ']' to close [a") == true)
}

@Test func parse_invalidEscape_failsWithLine() {
    #expect(parseError(#"a = "bad \q""#)?.contains(#"file.toml:1: invalid escape '\q'"#) == true)
}

@Test(arguments: [#"a = "\u12""#, #"a = "\uZZZZ""#, #"a = "\uD800""#, #"a = "\U00110000""#])
func parse_invalidUnicodeEscape_failsWithLine(text: String) {
    #expect(parseError(text)?.contains("file.toml:1: invalid escape") == true)
}

@Test func parse_controlCharacterInString_failsWithLine() {
    #expect(parseError("a = \"x\u{01}\"")?.contains("file.toml:1: control character") == true)
}

@Test func parse_unquotedWord_failsSayingStringsMustBeQuoted() {
    #expect(
        parseError("a = hello")?.contains(#"file.toml:1: invalid value 'hello'; a string must be quoted, as in "hello""#)
            == true)
    // The whole unquoted run is named, not the part read before the reader stopped.
    #expect(
        parseError("a = http://x # c")?.contains(
            #"file.toml:1: invalid value 'http://x'; a string must be quoted, as in "http://x""#) == true)
}

@Test(arguments: [
    ("a = 1979-05-27", "dates are not supported"),
    ("a = 07:32:00", "dates are not supported"),
    ("a = 1979-05-27T07:32:00Z", "dates are not supported"),
])
func parse_unsupportedSyntax_failsSayingSo(text: String, expected: String) {
    #expect(parseError(text)?.contains("file.toml:1: \(expected)") == true)
}

@Test(arguments: [
    ("a = 01", "leading zeros"), ("a = 1__0", "misplaced '_'"), ("a = _1", "misplaced '_'"),
    ("a = 1_", "misplaced '_'"), ("a = 9223372036854775808", "out of range"),
    ("a = 0xFFFFFFFFFFFFFFFF", "out of range"), ("a = 1.", "invalid value"), ("a = .5", "invalid value"),
    ("a = 0x", "invalid value"), ("a = +0x1", "invalid value"), ("a = 1e", "invalid value"),
    ("a = True", "invalid value"),
])
func parse_malformedNumber_failsWithLine(text: String, expected: String) {
    let message = parseError(text)
    #expect(message?.hasPrefix("file.toml:1: ") == true)
    #expect(message?.contains(expected) == true, "\(text): \(message ?? "parsed")")
}

@Test func parse_deeplyNestedArrays_failInsteadOfCrashing() {
    let text = "a = " + String(repeating: "[", count: 100_000) + String(repeating: "]", count: 100_000)
    #expect(parseError(text)?.contains("file.toml:1: values are nested too deeply") == true)
}

@Test func parse_veryLongDottedKey_failsInsteadOfCrashing() {
    let text = Array(repeating: "a", count: 10_000).joined(separator: ".") + " = 1"
    #expect(parseError(text)?.contains("file.toml:1: key") == true)
}

@Test func parse_randomGarbage_neverCrashes() {
    // A fixed seed keeps the run reproducible; the alphabet leans on the characters the parser branches on.
    var seed: UInt64 = 0x5EED
    let alphabet = Array("ab1_-.=\"'\\u[]{},#: \t\n\r+exf0".unicodeScalars) + ["\u{0}", "\u{E9}", "\u{301}", "\u{FEFF}"]
    for _ in 0..<5_000 {
        var text = String.UnicodeScalarView()
        seed = seed &* 6364136223846793005 &+ 1442695040888963407
        for _ in 0..<Int(seed >> 58) {
            seed = seed &* 6364136223846793005 &+ 1442695040888963407
            text.append(alphabet[Int(seed >> 33) % alphabet.count])
        }
        if let message = parseError(String(text)) {
            #expect(message.hasPrefix("file.toml:"))
        }
    }
}

// MARK: - PluginManifest

@Test func manifest_emptyFile_isTheDefault() throws {
    let manifest = try PluginManifest.parse("", fileName: "file.toml")
    #expect(manifest == PluginManifest())
    #expect(manifest.memoryLimit == nil)
    #expect(PluginManifest.defaultMemoryLimit == 32 * miB)
}

@Test func manifest_fullFile_readsEveryField() throws {
    let text = """
        version = "1.2.0"
        description = "Sends heartbeats"

        [permissions]
        network = ["example.com:443", "*.local:80"]

        [limits]
        memory = "64MiB"

        [config]
        interval = 5
        target = { host = "h", port = 1 }
        """
    let manifest = try PluginManifest.parse(text, fileName: "file.toml")
    #expect(manifest.version == "1.2.0")
    #expect(manifest.description == "Sends heartbeats")
    #expect(manifest.networkPermissions == ["example.com:443", "*.local:80"])
    #expect(manifest.memoryLimit == 64 * miB)
    #expect(manifest.config.keys == ["interval", "target"])
    #expect(manifest.config["interval"] == .integer(5))
}

@Test(arguments: [
    ("\"512KiB\"", 512 * kiB), ("\"64MiB\"", 64 * miB), ("\"1GiB\"", giB), ("\"65536\"", 65536),
    ("\"100KB\"", 100_000), ("\"2MB\"", 2_000_000), ("\"1GB\"", 1_000_000_000), ("\"70000B\"", 70000),
    ("\" 64 MiB \"", 64 * miB), ("131072", 131_072),
] as [(String, Int)])
func manifest_memory_acceptsBytesAndUnits(text: String, expected: Int) throws {
    let manifest = try PluginManifest.parse("[limits]\nmemory = \(text)", fileName: "file.toml",
                                            maximumMemoryLimit: 2 * giB)
    #expect(manifest.memoryLimit == expected)
}

@Test func manifest_memoryAboveMaximum_failsNamingBoth() {
    let message = manifestError("[limits]\nmemory = \"512MiB\"")
    #expect(message == "file.toml:2: [limits] memory is 512 MiB, above the host maximum of 256 MiB")
}

@Test func manifest_memoryAtMaximum_isAccepted() throws {
    let manifest = try PluginManifest.parse("[limits]\nmemory = \"256MiB\"", fileName: "file.toml")
    #expect(manifest.memoryLimit == PluginManifest.maximumMemoryLimit)
}

@Test func manifest_memoryAboveCallersMaximum_fails() {
    let message = manifestError("[limits]\nmemory = \"64MiB\"", maximumMemoryLimit: 16 * miB)
    #expect(message == "file.toml:2: [limits] memory is 64 MiB, above the host maximum of 16 MiB")
}

@Test func manifest_memoryBelowMinimum_fails() {
    let message = manifestError("[limits]\nmemory = \"1KiB\"")
    #expect(message == "file.toml:2: [limits] memory is 1 KiB, below the minimum of 64 KiB")
}

@Test(arguments: ["0", "-1", "\"0MiB\""])
func manifest_memoryNotPositive_fails(text: String) {
    #expect(manifestError("[limits]\nmemory = \(text)") == "file.toml:2: [limits] memory must be more than 0 bytes")
}

@Test(arguments: ["\"64 megabytes\"", "\"MiB\"", "\"1.5GiB\"", "\"64mib\"", "\"\""])
func manifest_memoryWithUnknownUnit_failsListingUnits(text: String) {
    #expect(manifestError("[limits]\nmemory = \(text)")?.contains("file.toml:2: [limits] memory") == true)
    #expect(manifestError("[limits]\nmemory = \(text)")?.contains("KiB, MiB, GiB") == true)
}

@Test func manifest_memoryOverflowingInt_fails() {
    #expect(manifestError("[limits]\nmemory = \"99999999999999GiB\"")?.contains("is too large") == true)
}

@Test func manifest_memoryOfWrongType_fails() {
    #expect(manifestError("[limits]\nmemory = 1.5")?.hasPrefix("file.toml:2: [limits] memory must be a number") == true)
}

@Test func manifest_unknownTopLevelKey_failsNamingValidOnes() {
    let message = manifestError("version = \"1\"\nname = \"x\"")
    #expect(message == "file.toml:2: unknown key 'name'; plugin.toml may contain version, description, swift, native, "
        + "[permissions], [limits], [background] and [config]")
}

@Test func manifest_swiftKey_namesTheCompiledInPlugin() throws {
    let manifest = try PluginManifest.parse("swift = \"heartbeat\"", fileName: "file.toml")
    #expect(manifest.swiftPlugin == "heartbeat")
    #expect(manifestError("swift = 1")?.hasPrefix("file.toml:1: swift must be a string") == true)
    #expect(manifestError("swift = \"\"")?.hasPrefix("file.toml:1: swift must name a Swift plugin") == true)
}

@Test func manifest_unknownTable_failsNamingValidOnes() {
    #expect(manifestError("[limit]\nmemory = 1")?.hasPrefix("file.toml:1: unknown table [limit]; plugin.toml") == true)
}

@Test func manifest_unknownKeyInPermissions_fails() {
    let message = manifestError("[permissions]\nfiles = []")
    #expect(message == "file.toml:2: unknown key 'files' in [permissions]; the only key there is network")
}

@Test func manifest_unknownTableInPermissions_fails() {
    let message = manifestError("[permissions.files]\nread = true")
    #expect(message?.hasPrefix("file.toml:1: unknown table [permissions.files]; the only key there is network") == true)
}

@Test func manifest_memoryInDecimalUnitsAboveMaximum_failsInThoseUnits() {
    let message = manifestError("[limits]\nmemory = \"300MB\"")
    #expect(message == "file.toml:2: [limits] memory is 300 MB, above the host maximum of 256 MiB")
}

@Test func manifest_unknownKeyInLimits_fails() {
    let message = manifestError("[limits]\ncpu = 1")
    #expect(message == "file.toml:2: unknown key 'cpu' in [limits]; the keys there are memory, store, files")
}

@Test(arguments: [
    ("version = 1", "file.toml:1: version must be a string"),
    ("\ndescription = true", "file.toml:2: description must be a string"),
    ("permissions = 1", "file.toml:1: [permissions] must be a table"),
    ("limits = \"x\"", "file.toml:1: [limits] must be a table"),
    ("config = []", "file.toml:1: [config] must be a table"),
    ("[permissions]\nnetwork = \"a:1\"", "file.toml:2: [permissions] network must be an array of strings"),
    ("[permissions]\nnetwork = [\"a:1\", 2]", "file.toml:2: [permissions] network must be an array of strings"),
])
func manifest_wrongValueType_failsWithLine(text: String, expected: String) {
    #expect(manifestError(text)?.hasPrefix(expected) == true, "\(manifestError(text) ?? "parsed")")
}

@Test func manifest_config_isFreeForm() throws {
    let text = "[config]\nanything = [1, 2]\n[config.nested]\nx = 'y'"
    let manifest = try PluginManifest.parse(text, fileName: "file.toml")
    #expect(manifest.config.keys == ["anything", "nested"])
    #expect(manifest.config["nested"] == .table(TOMLTable([("x", .string("y"), 4)])))
}

@Test func manifest_tomlSyntaxError_keepsFileAndLine() {
    #expect(manifestError("version = \"1\"\nversion = \"2\"")?.hasPrefix("file.toml:2: duplicate key") == true)
}
