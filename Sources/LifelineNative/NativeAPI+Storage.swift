import CLifelinePlugin
import Lifeline

extension NativeAPI {
    /// The store and the files folder.
    ///
    /// The store keeps JSON values, as Lua's does; a native plugin's value is text, kept as a JSON
    /// string, so a value reads back byte for byte (NULs included) and reads as a string in Lua.
    /// A value that is not a string (a Lua plugin of the same name stored a number or a table)
    /// reads as its JSON text.
    static func storeAndFiles(_ api: inout lifeline_api) {
        api.store_get = { token, key, keyLength, value, valueLength in
            NativeAPI.call(token, "store_get") { _, context throws(NativeError) in
                let key = try NativeAPI.text(key, keyLength, "the key")
                let store = try NativeAPI.store(context)
                let found: JSONValue?
                do throws(PluginCallError) { found = try store.get(key) } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
                guard let found else { throw NativeError(LIFELINE_ERR_NOT_FOUND, "no key '\(NativeAPI.printable(key))' in the store") }
                if case .string(let s) = found { NativeAPI.handOut(s.utf8, value, valueLength) } else { NativeAPI.handOut(found.serialized().utf8, value, valueLength) }
            }
        }
        api.store_set = { token, key, keyLength, value, valueLength in
            NativeAPI.call(token, "store_set") { _, context throws(NativeError) in
                let key = try NativeAPI.text(key, keyLength, "the key")
                guard let text = CBytes.text(value, valueLength) else {
                    if value == nil || valueLength < 0 {
                        throw NativeError(LIFELINE_ERR_ARGUMENT, CBytes.problem(value, valueLength, "the value"))
                    }
                    throw NativeError(
                        LIFELINE_ERR_ARGUMENT, "cannot store a value that is not valid UTF-8 (encode binary data first, "
                            + "or write it to a file)")
                }
                let store = try NativeAPI.store(context)
                do throws(PluginCallError) { try store.set(key, .string(text)) } catch { throw NativeError(LIFELINE_ERR_REFUSED, error.message) }
            }
        }
        api.store_delete = { token, key, keyLength in
            NativeAPI.call(token, "store_delete") { _, context throws(NativeError) in
                let key = try NativeAPI.text(key, keyLength, "the key")
                let store = try NativeAPI.store(context)
                let existed: Bool
                do throws(PluginCallError) { existed = try store.delete(key) } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
                guard existed else { throw NativeError(LIFELINE_ERR_NOT_FOUND, "no key '\(NativeAPI.printable(key))' in the store") }
            }
        }
        api.file_read = { token, name, nameLength, data, length in
            NativeAPI.call(token, "file_read") { _, context throws(NativeError) in
                let name = try NativeAPI.text(name, nameLength, "the file's name")
                let files = try NativeAPI.files(context, naming: name)
                let found: [UInt8]?
                do throws(PluginCallError) { found = try files.read(name) } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
                guard let found else { throw NativeError(LIFELINE_ERR_NOT_FOUND, "no file '\(NativeAPI.printable(name))'") }
                NativeAPI.handOut(found, data, length)
            }
        }
        api.file_write = { token, name, nameLength, data, length in
            NativeAPI.call(token, "file_write") { _, context throws(NativeError) in
                let name = try NativeAPI.text(name, nameLength, "the file's name")
                let bytes = try NativeAPI.bytes(data, length, "the data")
                let files = try NativeAPI.files(context, naming: name)
                do throws(PluginCallError) { try files.write(name, bytes: bytes) } catch { throw NativeError(LIFELINE_ERR_REFUSED, error.message) }
            }
        }
        api.file_remove = { token, name, nameLength in
            NativeAPI.call(token, "file_remove") { _, context throws(NativeError) in
                let name = try NativeAPI.text(name, nameLength, "the file's name")
                let files = try NativeAPI.files(context, naming: name)
                let removed: Bool
                do throws(PluginCallError) { removed = try files.remove(name) } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
                guard removed else { throw NativeError(LIFELINE_ERR_NOT_FOUND, "no file '\(NativeAPI.printable(name))'") }
            }
        }
        api.file_list = { token, names, length in
            NativeAPI.call(token, "file_list") { _, context throws(NativeError) in
                let files = try NativeAPI.files(context)
                let list: [String]
                do throws(PluginCallError) { list = try files.list() } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
                var bytes: [UInt8] = []
                for name in list { bytes += Array(name.utf8) + [0] }
                NativeAPI.handOut(bytes, names, length)
            }
        }
    }

    private static func store(_ context: PluginContext) throws(NativeError) -> PluginStore {
        do throws(PluginCallError) { return try context.store() } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
    }

    private static func files(_ context: PluginContext) throws(NativeError) -> PluginFiles {
        do throws(PluginCallError) { return try context.files() } catch { throw NativeError(LIFELINE_ERR_IO, error.message) }
    }

    /// The files folder, once `name` is one its rules allow: a refused name ("..", empty, a NUL,
    /// a link out) is REFUSED for every call, as for a write, and never reads as a failed folder.
    private static func files(_ context: PluginContext, naming name: String) throws(NativeError) -> PluginFiles {
        let files = try files(context)
        do throws(PluginCallError) { try files.checkName(name) } catch { throw NativeError(LIFELINE_ERR_REFUSED, error.message) }
        return files
    }

    /// A key or a name for a message: NULs shown as \0.
    static func printable(_ text: String) -> String { text.replacingOccurrences(of: "\0", with: "\\0") }
}

extension NativeAPI {
    /// Scheduled tasks and the completions of fetch and push events.
    static func systemTasks(_ api: inout lifeline_api) {
        api.register_task = { token, identifier, length, handler, user in
            NativeAPI.call(token, "register_task") { handle, context throws(NativeError) in
                let identifier = try NativeAPI.text(identifier, length, "the identifier")
                guard let handler else { throw NativeError(LIFELINE_ERR_ARGUMENT, "the handler is NULL") }
                let task = SystemTaskHandler(
                    run: { [weak handle] info in
                        guard let handle else { return .returned }
                        let identifier = Array(info.identifier.utf8CString)
                        handle.taskExpirations[info.id] = .some(nil)
                        return handle.invoke("the \(info.identifier) task's handler") {
                            identifier.withUnsafeBufferPointer { identifier in
                                var task = lifeline_task(
                                    id: UInt64(info.id), identifier: identifier.baseAddress,
                                    identifier_len: identifier.count - 1,
                                    kind: info.kind == .processing ? Int32(LIFELINE_TASK_PROCESSING) : Int32(LIFELINE_TASK_REFRESH))
                                return handler(handle.token, &task, user)
                            }
                        }
                    },
                    expire: { [weak handle] info in
                        guard let handle, case let (expired, user)?? = handle.taskExpirations[info.id] else { return .returned }
                        return handle.invoke("the \(info.identifier) task's expiration handler") { expired(handle.token, user) }
                    },
                    finished: { [weak handle] info in handle?.taskExpirations[info.id] = nil })
                do throws(SystemTaskError) { try context.registerTask(identifier, handler: task) } catch {
                    throw NativeError(LIFELINE_ERR_REFUSED, error.message)
                }
            }
        }
        api.submit_task = { token, identifier, length, kind, earliest, flags in
            NativeAPI.call(token, "submit_task") { _, context throws(NativeError) in
                let identifier = try NativeAPI.text(identifier, length, "the identifier")
                let kinds: [Int32: SystemTaskKind] = [
                    Int32(LIFELINE_TASK_REFRESH): .refresh, Int32(LIFELINE_TASK_PROCESSING): .processing,
                ]
                guard let taskKind = kinds[kind] else {
                    throw NativeError(LIFELINE_ERR_ARGUMENT, "no task kind \(kind); use LIFELINE_TASK_REFRESH or LIFELINE_TASK_PROCESSING")
                }
                guard earliest.isFinite, earliest >= 0 else {
                    throw NativeError(LIFELINE_ERR_ARGUMENT, "the earliest begin must be a finite number of seconds, 0 or more")
                }
                let known = UInt32(LIFELINE_REQUIRES_NETWORK | LIFELINE_REQUIRES_POWER)
                guard flags & ~known == 0 else { throw NativeError(LIFELINE_ERR_ARGUMENT, "unknown flags \(flags & ~known)") }
                let request = SystemTaskRequest(
                    identifier: identifier, kind: taskKind, earliestBegin: earliest,
                    requiresNetwork: flags & UInt32(LIFELINE_REQUIRES_NETWORK) != 0,
                    requiresPower: flags & UInt32(LIFELINE_REQUIRES_POWER) != 0)
                do throws(SystemTaskError) { try context.submitTask(request) } catch { throw NativeError(LIFELINE_ERR_REFUSED, error.message) }
            }
        }
        api.cancel_task = { token, identifier, length in
            NativeAPI.call(token, "cancel_task") { _, context throws(NativeError) in
                let identifier = try NativeAPI.text(identifier, length, "the identifier")
                let cancelled: Bool
                do throws(SystemTaskError) { cancelled = try context.cancelTask(identifier) } catch { throw NativeError(LIFELINE_ERR_REFUSED, error.message) }
                guard cancelled else { throw NativeError(LIFELINE_ERR_NOT_FOUND, "no pending request for '\(identifier)'") }
            }
        }
        api.set_task_expiration = { token, task, expired, user in
            NativeAPI.call(token, "set_task_expiration") { handle, _ throws(NativeError) in
                let id = try NativeAPI.id(task, "task")
                guard handle.taskExpirations[id] != nil else {
                    throw NativeError(LIFELINE_ERR_NOT_FOUND, "no scheduled task \(task) is running")
                }
                handle.taskExpirations[id] = .some(expired.map { ($0, user) })
            }
        }
        api.set_task_completed = { token, task, success in
            NativeAPI.call(token, "set_task_completed") { _, context throws(NativeError) in
                let completed: Bool
                let id = try NativeAPI.id(task, "task")
                do throws(SystemTaskError) { completed = try context.setTaskCompleted(id, success: success != 0) } catch {
                    throw NativeError(LIFELINE_ERR_NOT_FOUND, error.message)
                }
                guard completed else {
                    throw NativeError(LIFELINE_ERR_NOT_FOUND, "task \(task) was completed already, or its time ran out")
                }
            }
        }
        api.complete_fetch = { token, completion, result in
            NativeAPI.call(token, "complete_fetch") { _, context throws(NativeError) in
                let results: [FetchResult] = [.newData, .noData, .failed]
                guard results.indices.contains(Int(result)) else {
                    throw NativeError(LIFELINE_ERR_ARGUMENT, "no fetch result \(result); use LIFELINE_FETCH_NEW_DATA, _NO_DATA or _FAILED")
                }
                let completed: Bool
                let id = try NativeAPI.id(completion, "completion")
                do throws(SystemTaskError) { completed = try context.complete(id, with: .fetch(results[Int(result)])) } catch {
                    throw NativeError(LIFELINE_ERR_NOT_FOUND, error.message)
                }
                guard completed else {
                    throw NativeError(LIFELINE_ERR_NOT_FOUND, "completion \(completion) was called already, or its time ran out")
                }
            }
        }
    }
}
