import CLifelinePlugin
import Foundation
import Lifeline

/// One launch's `lifeline_plugin *`: what the api's functions reach through the handle a plugin
/// passes them. The pointer is a number, never dereferenced, so a handle kept past its launch
/// points at nothing that could be freed.
final class NativeHandle {
    let token: OpaquePointer
    let pluginName: String
    /// Nil once the launch's instance is closed.
    var context: PluginContext?
    /// The message a callback gave `api->fail` before it returned an error.
    var failMessage: String?
    /// The scheduled tasks running, by id, with the expiration callback `set_task_expiration`
    /// gave each (nil: none yet).
    var taskExpirations: [Int: (lifeline_callback_fn, UnsafeMutableRawPointer?)?] = [:]

    private static let tokens = Locked(0)

    init(pluginName: String, context: PluginContext) {
        self.pluginName = pluginName
        self.context = context
        let number = NativeHandle.tokens.withLock { (n: inout Int) -> Int in
            n += 1
            return n
        }
        // Multiples of 16 from 16 up: never NULL, and aligned as a real pointer would be.
        token = OpaquePointer(bitPattern: number << 4)!
    }

    /// Runs the plugin's code with this handle as the one the api accepts on this thread, and
    /// turns its status into the outcome the host records.
    func invoke(_ what: String, _ body: () -> Int32) -> CallOutcome {
        let state = NativeThread.state
        let saved = state.current
        state.current = self
        failMessage = nil
        let status = body()
        state.current = saved
        guard status != Int32(LIFELINE_OK) else { return .returned }
        let message = failMessage ?? "\(what) returned status \(status)"
        failMessage = nil
        return .raised(message: message, traceback: "(native code: no traceback)")
    }
}

/// What the api keeps per thread: the handle whose code the host is running on it, the last
/// error, and the bytes handed out last. A call from a thread the host did not call in on finds
/// nothing here, and touches only this thread's own error.
final class NativeThread {
    var current: NativeHandle?
    /// The last error, NUL-terminated for C code that prints it as a string.
    let error = CBuffer()
    /// The bytes the last call that hands some out returned (a value, a file, a list).
    let out = CBuffer()
    /// The app's state, as `app_state` hands it out.
    let state = CBuffer()

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key) { pointer in
            guard let pointer else { return }
            Unmanaged<NativeThread>.fromOpaque(pointer).release()
        }
        return key
    }()

    static var state: NativeThread {
        if let pointer = pthread_getspecific(key) { return Unmanaged<NativeThread>.fromOpaque(pointer).takeUnretainedValue() }
        let made = NativeThread()
        pthread_setspecific(key, Unmanaged.passRetained(made).toOpaque())
        return made
    }

    func setError(_ message: String) {
        error.set(message.utf8)
    }
}

/// Bytes handed to C: memory of its own, which stays where it is until the next `set`, with a NUL
/// after the bytes that the length does not count.
final class CBuffer {
    private(set) var pointer: UnsafeMutablePointer<CChar>
    private(set) var count = 0

    init() {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: 0)
    }

    deinit { pointer.deallocate() }

    func set(_ bytes: some Collection<UInt8>) {
        pointer.deallocate()
        pointer = .allocate(capacity: bytes.count + 1)
        // One copy for contiguous bytes (a file's, a value's): a byte loop took seconds for tens
        // of MiB in a debug build, time a handler's watchdog window counts.
        let copied: Int? = bytes.withContiguousStorageIfAvailable { buffer in
            if let base = buffer.baseAddress { UnsafeMutableRawPointer(pointer).copyMemory(from: base, byteCount: buffer.count) }
            return buffer.count
        }
        var i = copied ?? 0
        if copied == nil {
            for byte in bytes {
                pointer[i] = CChar(bitPattern: byte)
                i += 1
            }
        }
        pointer[i] = 0
        count = i
    }

    /// Writes where it is and how long, for a C caller's out parameters.
    func hand(_ where: UnsafeMutablePointer<UnsafePointer<CChar>?>?, _ length: UnsafeMutablePointer<Int>?) {
        `where`?.pointee = UnsafePointer(pointer)
        length?.pointee = count
    }
}

/// Bytes from C: a pointer and a length (NULL with length 0 is empty).
enum CBytes {
    /// The bytes, or nil for NULL with a length, or a length no buffer can have: a size_t past
    /// Int.max arrives as a negative Int (as `(size_t)-1` from a failed strlen-like call would),
    /// and making a buffer of it would stop the host.
    static func buffer(_ pointer: UnsafePointer<CChar>?, _ length: Int) -> UnsafeRawBufferPointer? {
        if length == 0 { return UnsafeRawBufferPointer(start: nil, count: 0) }
        guard let pointer, length > 0 else { return nil }
        return UnsafeRawBufferPointer(start: pointer, count: length)
    }

    /// Why `buffer` refused a pointer and a length, for the message of `what`.
    static func problem(_ pointer: UnsafePointer<CChar>?, _ length: Int, _ what: String) -> String {
        if length < 0 {
            return "\(what)'s length \(UInt(bitPattern: length)) is past any buffer (a (size_t)-1 or a negative number made unsigned?)"
        }
        return "\(what) is NULL with a length of \(length)"
    }

    /// Text that must be UTF-8 (any bytes, NUL included, that form valid UTF-8).
    static func text(_ pointer: UnsafePointer<CChar>?, _ length: Int) -> String? {
        guard let bytes = buffer(pointer, length) else { return nil }
        return String(validating: bytes, as: UTF8.self)
    }
}
