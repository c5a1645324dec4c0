import Glibc

/// The system's libqrencode (Debian `libqrencode4`), opened with `dlopen` the first time a login
/// draws a QR code, never linked: `authflow` runs without it, and only a device login loads it.
final class QREncoder: @unchecked Sendable {  // safe: two C function pointers and a dlopen handle, immutable, never closed
    /// `QRcode_encodeString(string, version, level, hint, casesensitive)`; the result is libqrencode's
    /// `QRcode { int version; int width; unsigned char *data; }` (qrencode.h), read by offset.
    private typealias EncodeString = @convention(c) (UnsafePointer<CChar>, Int32, Int32, Int32, Int32) -> UnsafeMutableRawPointer?
    private typealias Free = @convention(c) (UnsafeMutableRawPointer?) -> Void

    private let encodeString: EncodeString
    private let free: Free

    private init(encodeString: EncodeString, free: Free) {
        self.encodeString = encodeString
        self.free = free
    }

    /// The library names tried, in order.
    static let libraryNames = ["libqrencode.so.4", "libqrencode.so"]

    /// The process's libqrencode, or nil when none of `libraryNames` loads (then `authflow` shows the text alone).
    static let shared: QREncoder? = load(libraryNames)

    /// Opens the first of `names` that loads and resolves `QRcode_encodeString` and `QRcode_free`.
    static func load(_ names: [String]) -> QREncoder? {
        for name in names {
            guard let handle = dlopen(name, RTLD_NOW | RTLD_LOCAL) else { continue }
            guard let encode = dlsym(handle, "QRcode_encodeString"), let free = dlsym(handle, "QRcode_free") else {
                dlclose(handle)
                continue
            }
            return QREncoder(encodeString: unsafeBitCast(encode, to: EncodeString.self), free: unsafeBitCast(free, to: Free.self))
        }
        return nil
    }

    /// The modules of `text` encoded in 8-bit mode at error-correction level M, the smallest
    /// version that fits; `true` is a dark module. Nil when libqrencode refuses it (too long).
    func modules(_ text: String) -> [[Bool]]? {
        // QR_ECLEVEL_M = 1, QR_MODE_8 = 2 (qrencode.h); version 0: the smallest that fits; case-sensitive.
        guard let code = text.withCString({ encodeString($0, 0, 1, 2, 1) }) else { return nil }
        defer { free(code) }
        let width = Int(code.load(fromByteOffset: MemoryLayout<Int32>.stride, as: Int32.self))
        guard width > 0, width <= 177,
              let data = code.load(fromByteOffset: 2 * MemoryLayout<Int32>.stride, as: UnsafePointer<UInt8>?.self)
        else { return nil }
        var rows: [[Bool]] = []
        for row in 0..<width {
            var modules: [Bool] = []
            for column in 0..<width { modules.append(data[row * width + column] & 1 == 1) }
            rows.append(modules)
        }
        return rows
    }
}

/// A QR code drawn for a terminal with half-block characters: each character is two modules,
/// one above the other, so the code is about square. Light modules are drawn (`█ ▀ ▄`), dark
/// ones left blank, inside a light quiet zone of 4 modules (ISO/IEC 18004 asks for 4); with
/// colour, every line is set white on black so the code reads the same on any terminal theme.
enum QRCodeText {
    /// The quiet zone on every side, in modules.
    static let quietZone = 4

    /// The lines of `modules` drawn with half blocks (no newline at the end of each).
    static func lines(_ modules: [[Bool]], color: Bool) -> [String] {
        let size = modules.count + 2 * quietZone
        func isLight(_ row: Int, _ column: Int) -> Bool {
            let row = row - quietZone
            let column = column - quietZone
            guard modules.indices.contains(row), modules.indices.contains(column) else { return true }
            return !modules[row][column]
        }
        var lines: [String] = []
        for top in stride(from: 0, to: size, by: 2) {
            var line = color ? "\u{1B}[40;97m" : ""
            for column in 0..<size {
                let upper = isLight(top, column)
                let lower = top + 1 < size ? isLight(top + 1, column) : false
                line += upper ? (lower ? "█" : "▀") : (lower ? "▄" : " ")
            }
            lines.append(line + (color ? "\u{1B}[0m" : ""))
        }
        return lines
    }

    /// The width of the drawn code in terminal columns.
    static func width(_ modules: [[Bool]]) -> Int { modules.count + 2 * quietZone }
}

extension Context {
    /// The columns of the terminal on stderr (`TIOCGWINSZ`), else `COLUMNS`, else 80.
    var stderrColumns: Int {
        var size = winsize()
        if output.stderrIsTerminal, ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let columns = environment["COLUMNS"].flatMap({ Int($0) }), columns > 0 { return columns }
        return 80
    }

    /// The QR code of `url` for stderr, or nil when it is not drawn: `--no-qr`; without `--qr`, when
    /// stderr is not a terminal, `NO_COLOR` or `TERM=dumb` is set, or the terminal is narrower than
    /// the code; when libqrencode is missing (then a note says so, since a code was expected) or
    /// refuses the text.
    func qrCode(_ url: String, forced: Bool?, encoder: QREncoder? = QREncoder.shared, provider: String) -> String? {
        if forced == false { return nil }
        let style = errStyle
        if forced == nil {
            guard output.stderrIsTerminal, (environment["NO_COLOR"] ?? "").isEmpty, environment["TERM"] != "dumb" else { return nil }
        }
        guard let encoder else {
            // Said when the code would have been drawn: libqrencode4 is only recommended by the
            // package, and a person who asked for the code (or always sees one) should learn why not.
            err.write(style.yellow("note:") + " no QR code: \(QREncoder.libraryNames[0]) could not be loaded"
                      + " (Debian: apt-get install libqrencode4; --no-qr hides this note)\n")
            return nil
        }
        guard let modules = encoder.modules(url) else { return nil }
        if forced == nil, QRCodeText.width(modules) > stderrColumns { return nil }
        return QRCodeText.lines(modules, color: style.enabled).joined(separator: "\n") + "\n"
    }
}
