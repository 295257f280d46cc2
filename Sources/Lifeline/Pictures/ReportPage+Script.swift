/// The page's inline style and script, kept as files of their own (Resources/report.css and
/// report.js) and compiled into the binary by SwiftPM's `embedInCode`. They are constant text:
/// everything that varies comes in through the embedded JSON, which the script reads as data and
/// writes into the page only through `esc` (markup) or `textContent` (tooltips).
///
/// Not `Bundle.module`: on Linux it stops the program when the bundle folder is not beside the
/// binary, as for a binary copied elsewhere. Bytes compiled in cannot go missing.
extension ReportPage {
    static let style = resourceText(PackageResources.report_css)

    static let script = resourceText(PackageResources.report_js)

    /// A resource file's text without the newline that ends it: the page puts the text straight
    /// between its tags, as it did when the text was a Swift string.
    static func resourceText(_ bytes: [UInt8]) -> String {
        var text = String(decoding: bytes, as: UTF8.self)
        while text.hasSuffix("\n") { text.removeLast() }
        return text
    }
}
