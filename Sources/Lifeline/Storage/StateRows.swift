import Foundation
import GRDB

/// Why one row of the state database cannot be read whole: a column holds another type than the
/// host writes there, text that is not UTF-8 or holds a NUL byte, a number out of its range, or a
/// name this host does not know.
struct RowDamage: Error {
    let column: String
    let why: String

    var message: String { "\(column) \(why)" }
}

/// One row of the state database, read column by column without trusting what it holds.
///
/// GRDB's non-optional subscripts (`row["earliest"] as Double`) end the process when a value
/// cannot be converted, and its `String` decoding stops at the first NUL byte and repairs invalid
/// UTF-8. Whoever can write the file could then crash the host or make it read another name than
/// the one stored. Here each value's SQLite type is checked first, and text is taken from its raw
/// bytes; anything else is a `RowDamage`, so the caller skips the row.
///
/// The row must come from a cursor (`Row.fetchCursor`): a copied row has already lost its text's
/// raw bytes.
struct StoredRow {
    let row: Row

    private func value(_ column: String) throws(RowDamage) -> (index: Int, value: DatabaseValue) {
        guard let index = Array(row.columnNames).firstIndex(where: { $0.caseInsensitiveCompare(column) == .orderedSame }) else {
            throw RowDamage(column: column, why: "is missing")
        }
        do {
            return (index, try row.decode(DatabaseValue.self, atIndex: index))
        } catch {
            throw RowDamage(column: column, why: "cannot be read")
        }
    }

    /// The column's value as the host would show it in a warning.
    func shown(_ column: String) -> String {
        guard let (index, value) = try? self.value(column) else { return "?" }
        switch value.storage {
        case .null: return "NULL"
        case .int64(let n): return String(n)
        case .double(let d): return String(d)
        case .blob(let data): return StoredRow.shown(bytes: Array(data), blob: true)
        case .string:
            let bytes = (try? row.withUnsafeData(atIndex: index) { $0.map { Array($0) } ?? [] }) ?? []
            return StoredRow.shown(bytes: bytes, blob: false)
        }
    }

    /// Text, or bytes as SQL's hex literal when they are not text a terminal can show, cut after
    /// 64 bytes.
    static func shown(bytes: [UInt8], blob: Bool) -> String {
        let cut = bytes.count > 64 ? Array(bytes.prefix(64)) : bytes
        let more = bytes.count > 64 ? "…" : ""
        if !blob, let text = String(validating: cut, as: UTF8.self),
            !text.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || (0x80..<0xA0).contains($0.value) })
        {
            return "'" + text.replacingOccurrences(of: "'", with: "''") + more + "'"
        }
        return "x'" + cut.map { String($0, radix: 16).leftPadded(2) }.joined() + more + "'"
    }

    private static func kind(_ value: DatabaseValue) -> String {
        switch value.storage {
        case .null: "NULL"
        case .int64: "an integer"
        case .double: "a real number"
        case .string: "text"
        case .blob: "a blob"
        }
    }

    /// Text of valid UTF-8. A NUL byte is refused unless `allowingNUL`: the host binds its own
    /// text as C strings, so a NUL is never one it wrote, and a name cut there would be another.
    func text(_ column: String, allowingNUL: Bool = false) throws(RowDamage) -> String {
        let (index, value) = try self.value(column)
        guard case .string = value.storage else {
            throw RowDamage(column: column, why: "is \(StoredRow.kind(value)) instead of text")
        }
        // Straight from SQLite's bytes into the string, one copy (a value may be megabytes).
        let text: String??
        do {
            text = try row.withUnsafeData(atIndex: index) { data in String(validating: data ?? Data(), as: UTF8.self) }
        } catch {
            throw RowDamage(column: column, why: "cannot be read")
        }
        guard let text = text ?? nil else { throw RowDamage(column: column, why: "is not valid UTF-8") }
        guard allowingNUL || !text.utf8.contains(0) else { throw RowDamage(column: column, why: "holds a NUL byte") }
        return text
    }

    /// Text, or nil for NULL.
    func optionalText(_ column: String) throws(RowDamage) -> String? {
        if case .null = try value(column).value.storage { return nil }
        return try text(column)
    }

    /// An integer within `range`; a real number is not one, even a whole one.
    func integer(_ column: String, in range: ClosedRange<Int64>) throws(RowDamage) -> Int64 {
        let value = try self.value(column).value
        guard case .int64(let n) = value.storage else {
            throw RowDamage(column: column, why: "is \(StoredRow.kind(value)) instead of an integer")
        }
        guard range.contains(n) else {
            throw RowDamage(column: column, why: "is \(n), outside \(range.lowerBound)...\(range.upperBound)")
        }
        return n
    }

    /// An integer within `range`, or nil for NULL.
    func optionalInteger(_ column: String, in range: ClosedRange<Int64>) throws(RowDamage) -> Int64? {
        if case .null = try value(column).value.storage { return nil }
        return try integer(column, in: range)
    }

    /// A number (integer or real) within `range`, which excludes NaN and the infinities.
    func real(_ column: String, in range: ClosedRange<Double>) throws(RowDamage) -> Double {
        let value = try self.value(column).value
        let number: Double
        switch value.storage {
        case .int64(let n): number = Double(n)
        case .double(let d): number = d
        default: throw RowDamage(column: column, why: "is \(StoredRow.kind(value)) instead of a number")
        }
        guard range.contains(number) else {
            throw RowDamage(column: column, why: "is \(number), outside \(range.lowerBound)...\(range.upperBound)")
        }
        return number
    }

    /// 0 or 1, as SQLite keeps a boolean.
    func bool(_ column: String) throws(RowDamage) -> Bool {
        let value = try self.value(column).value
        guard case .int64(let n) = value.storage, n == 0 || n == 1 else {
            throw RowDamage(column: column, why: "is \(shown(column)) instead of 0 or 1")
        }
        return n == 1
    }

    /// A name from a fixed set (a `RawRepresentable` enum's raw values).
    func name<T: RawRepresentable>(_ column: String, as type: T.Type) throws(RowDamage) -> T where T.RawValue == String {
        let raw = try text(column)
        guard let named = T(rawValue: raw) else {
            throw RowDamage(column: column, why: "is \(shown(column)), a name this Lifeline does not know")
        }
        return named
    }
}

extension String {
    fileprivate func leftPadded(_ width: Int) -> String {
        count >= width ? self : String(repeating: "0", count: width - count) + self
    }
}

extension StateDatabase {
    /// The rows `sql` selects, each read by `read`; a row it cannot read whole is skipped, with a
    /// warning that names `table` and the row (`name`, which should name the row by its key).
    /// An SQLite error (a damaged page, a missing table) still throws: the database is unusable.
    func readRows<T>(
        _ db: Database, table: String, sql: String, arguments: StatementArguments = StatementArguments(),
        name: (StoredRow) -> String, _ read: (StoredRow) throws(RowDamage) -> T
    ) throws -> [T] {
        var result: [T] = []
        let cursor = try Row.fetchCursor(db, sql: sql, arguments: arguments)
        while let row = try cursor.next() {
            let stored = StoredRow(row: row)
            do throws(RowDamage) {
                result.append(try read(stored))
            } catch {
                warnDamaged("skipped \(table) row \(name(stored)): \(error.message)")
            }
        }
        return result
    }
}
