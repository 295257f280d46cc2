import CLifelinePlugin
import Foundation
import Lifeline
import LifelineNative
import LifelineTesting
import Testing

/// Native plugins compiled from C with the system's cc against the package's header, loaded
/// with dlopen and run under simulate in this process.
@Suite struct NativePluginTests {
    // MARK: - Tasks

    @Test func aTaskIsEndedOnEveryPath_theTimerOnesAndTheExpiredOne() throws {
        let plugin = try NativeBuild.plugin(
            "tasks",
            """
            static uint64_t quick, slow, slow_timer;
            static int quick_done(lifeline_plugin *self, void *u) { (void)u; return api->end_task(self, quick); }
            static int quick_expired(lifeline_plugin *self, void *u) { (void)u; return api->end_task(self, quick); }
            static int slow_done(lifeline_plugin *self, void *u) { (void)u; return api->end_task(self, slow); }
            static int slow_expired(lifeline_plugin *self, void *u) {
                (void)u;
                api->cancel_timer(self, slow_timer);
                say(self, "slow expired");
                return api->end_task(self, slow);
            }
            static int on_background(lifeline_plugin *self, const lifeline_event *e, void *u) {
                (void)e, (void)u;
                api->begin_task(self, S("quick"), quick_expired, NULL, &quick);
                api->after(self, 2, quick_done, NULL, NULL);
                api->begin_task(self, S("slow"), slow_expired, NULL, &slow);
                api->after(self, 100, slow_done, NULL, &slow_timer);
                double left;
                api->time_remaining(self, &left);
                say(self, "remaining %.0f", left);
                return LIFELINE_OK;
            }
            INIT { return api->subscribe(self, S("didEnterBackground"), on_background, NULL, NULL); }
            """)
        let recorder = try run("0s launch\n1s background\n40s foreground\n45s terminate", [plugin])
        #expect(
            lines(recorder, only: taskEvents) == [
                "1 taskBegan plugin=tasks task=1 name=quick", "1 taskBegan plugin=tasks task=2 name=slow",
                "3 taskEnded plugin=tasks task=1 expired=false", "26 taskExpiring plugin=tasks task=2",
                "26 taskEnded plugin=tasks task=2 expired=true", "26 suspended",
            ])
        #expect(logs(recorder) == ["remaining 30", "slow expired"])
        #expect(pluginErrors(recorder).isEmpty)
        #expect(recorder.report().serialized().contains("\"kind\":\"native\""))
    }

    @Test func endingAWrongOrEndedTask_isNotFound_andTheHostWarnsAsIOSDoes() throws {
        let plugin = try NativeBuild.plugin(
            "ender",
            """
            static int on_background(lifeline_plugin *self, const lifeline_event *e, void *u) {
                (void)e, (void)u;
                uint64_t task;
                api->begin_task(self, S("t"), NULL, NULL, &task);
                int first = api->end_task(self, task);
                int again = api->end_task(self, task);
                int wrong = api->end_task(self, 12345);
                int zero = api->end_task(self, 0);
                size_t n;
                const char *why = api->last_error(self, &n);
                say(self, "%d %d %d %d %.*s", first, again, wrong, zero, (int)n, why);
                return LIFELINE_OK;
            }
            INIT { return api->subscribe(self, S("didEnterBackground"), on_background, NULL, NULL); }
            """)
        let recorder = try run("0s launch\n1s background\n10s terminate", [plugin])
        #expect(logs(recorder) == ["0 4 4 4 end_task: no task 0"])
        #expect(lines(recorder, only: ["taskEnded"]) == ["1 taskEnded plugin=ender task=1 expired=false"])
    }

    // MARK: - Errors, threads, ended launches

    @Test func aCallFromAThreadOfThePlugin_returnsTheThreadError_andChangesNothing() throws {
        let plugin = try NativeBuild.plugin(
            "threads",
            """
            #include <pthread.h>
            static lifeline_plugin *handle;
            static int statuses[3];
            static char message[200];
            static void *worker(void *arg) {
                (void)arg;
                statuses[0] = api->log(handle, LIFELINE_LOG_INFO, S("from a thread"));
                statuses[1] = api->store_set(handle, S("k"), S("v"));
                uint64_t task = 0;
                statuses[2] = api->begin_task(handle, S("sneaky"), NULL, NULL, &task);
                size_t n;
                const char *m = api->last_error(handle, &n);
                snprintf(message, sizeof message, "%.*s", (int)n, m);
                return NULL;
            }
            static int on_background(lifeline_plugin *self, const lifeline_event *e, void *u) {
                (void)e, (void)u;
                handle = self;
                pthread_t thread;
                pthread_create(&thread, NULL, worker, NULL);
                pthread_join(thread, NULL);
                const char *value;
                size_t len;
                int get = api->store_get(self, S("k"), &value, &len);
                say(self, "thread %d %d %d, then get %d", statuses[0], statuses[1], statuses[2], get);
                say(self, "%s", message);
                return LIFELINE_OK;
            }
            INIT { return api->subscribe(self, S("didEnterBackground"), on_background, NULL, NULL); }
            """)
        let recorder = try run("0s launch\n1s background\n10s terminate", [plugin])
        let said = logs(recorder)
        #expect(said.first == "thread 1 1 1, then get 4")
        #expect(said.last?.hasPrefix("begin_task: called outside the host's call into the plugin") == true)
        #expect(lines(recorder, only: ["taskBegan"]).isEmpty)
        #expect(!said.contains("from a thread"))
    }

    @Test func callsAfterTheLaunchEnded_orWithAnEndedLaunchsHandle_areRefused() throws {
        let plugin = try NativeBuild.plugin(
            "later",
            """
            static lifeline_plugin *first;
            static int launches, in_close = -1;
            INIT {
                launches++;
                if (launches == 1) { first = self; return LIFELINE_OK; }
                int old = api->log(first, LIFELINE_LOG_INFO, S("with the old handle"));
                size_t n;
                const char *why = api->last_error(self, &n);
                say(self, "old handle %d, in close %d: %.*s", old, in_close, (int)n, why);
                return LIFELINE_OK;
            }
            LIFELINE_EXPORT void lifeline_plugin_close(lifeline_plugin *self) {
                if (in_close < 0) in_close = api->store_set(self, S("k"), S("v"));
            }
            """)
        let recorder = try run("0s launch\n1s terminate\n2s launch\n3s terminate", [plugin])
        #expect(
            logs(recorder) == [
                "old handle 2, in close 2: log: the handle is not the one the host passed to the code running now "
                    + "(it belongs to an ended launch, or to another plugin); use the handle init or the callback was given"
            ])
    }

    @Test func aCallbackThatFails_isAPluginError_withTheMessageItGave() throws {
        let plugin = try NativeBuild.plugin(
            "failing",
            """
            static int on_background(lifeline_plugin *self, const lifeline_event *e, void *u) {
                (void)e, (void)u;
                api->fail(self, S("the disk\\0is full"));
                return 7;
            }
            static int on_foreground(lifeline_plugin *self, const lifeline_event *e, void *u) { (void)self, (void)e, (void)u; return 3; }
            INIT {
                api->subscribe(self, S("didEnterBackground"), on_background, NULL, NULL);
                return api->subscribe(self, S("willEnterForeground"), on_foreground, NULL, NULL);
            }
            """)
        let recorder = try run("0s launch\n1s background\n5s foreground\n10s terminate", [plugin])
        #expect(
            pluginErrors(recorder).map(\.message) == [
                "the disk\0is full", "the willEnterForeground handler returned status 3",
            ])
    }

    @Test func wrongArguments_areRefusedWithTheirStatus() throws {
        let plugin = try NativeBuild.plugin(
            "args",
            """
            static int noop(lifeline_plugin *s, const lifeline_event *e, void *u) { (void)s, (void)e, (void)u; return 0; }
            INIT {
                size_t n;
                int a = api->subscribe(self, S("didEnterBackgroundd"), noop, NULL, NULL);
                say(self, "%d %s", a, api->last_error(self, &n));
                int b = api->log(self, 9, S("x"));
                int c = api->store_set(self, S("k"), "\\xff", 1);
                say(self, "%d %d %s", b, c, api->last_error(self, &n));
                int d = api->store_get(self, NULL, 3, NULL, NULL);
                int e = api->after(self, -1, NULL, NULL, NULL);
                int f = api->submit_task(self, S("com.example.x"), 7, 0, 0);
                say(self, "%d %d %d", d, e, f);
                return LIFELINE_OK;
            }
            """)
        let recorder = try run("0s launch\n1s terminate", [plugin])
        let said = logs(recorder)
        #expect(said.count == 3)
        #expect(said[0].hasPrefix("3 subscribe: no event named 'didEnterBackgroundd'; the events are didFinishLaunching"))
        #expect(said[1] == "3 3 store_set: cannot store a value that is not valid UTF-8 (encode binary data first, or write it to a file)")
        #expect(said[2] == "3 3 3")
    }

    /// A length past any buffer ((size_t)-1, a negative number made unsigned) with a real pointer
    /// is refused as an argument; it used to stop the host making a buffer of a negative count.
    /// So is a NULL handle, named as such.
    @Test func aLengthPastAnyBuffer_orANullHandle_isAnArgumentError_notACrash() throws {
        let plugin = try NativeBuild.plugin(
            "lengths",
            """
            INIT {
                size_t n;
                const size_t huge = (size_t)-1;
                int a = api->log(self, LIFELINE_LOG_INFO, "abc", huge);
                say(self, "%d %s", a, api->last_error(self, &n));
                int b = api->store_set(self, S("k"), "v", huge);
                say(self, "%d %s", b, api->last_error(self, &n));
                int c = api->store_set(self, "k", huge, S("v"));
                int d = api->file_write(self, S("f"), "data", huge);
                int e = api->subscribe(self, "didEnterBackground", huge, NULL, NULL, NULL);
                int f = api->fail(self, "x", huge);
                int g = api->begin_task(self, "t", huge, NULL, NULL, NULL);
                int h = api->log(NULL, LIFELINE_LOG_INFO, S("x"));
                say(self, "%d %d %d %d %d %d %s", c, d, e, f, g, h, api->last_error(self, &n));
                return LIFELINE_OK;
            }
            """)
        let said = logs(try run("0s launch\n1s terminate", [plugin]))
        #expect(
            said == [
                "3 log: the message's length 18446744073709551615 is past any buffer (a (size_t)-1 or a negative number made unsigned?)",
                "3 store_set: the value's length 18446744073709551615 is past any buffer (a (size_t)-1 or a negative number made unsigned?)",
                "3 3 3 3 3 3 log: the handle is NULL; use the handle init or the callback was given",
            ])
    }

    /// A file name the folder's rules refuse is REFUSED for every file call, as for a write: it
    /// used to read as a failed folder (IO) for file_read and file_remove.
    @Test func aRefusedFileName_isRefused_forReadRemoveAndWriteAlike() throws {
        let plugin = try NativeBuild.plugin(
            "names",
            """
            INIT {
                const char *got;
                size_t len;
                for (int i = 0; i < 4; i++) {
                    static const char *const names[] = {"..", "", "a\\0b", "/etc/passwd"};
                    static const size_t lengths[] = {2, 0, 3, 11};
                    int read = api->file_read(self, names[i], lengths[i], &got, &len);
                    int removed = api->file_remove(self, names[i], lengths[i]);
                    int written = api->file_write(self, names[i], lengths[i], S("x"));
                    say(self, "%d %d %d", read, removed, written);
                }
                int missing = api->file_read(self, S("nothing-here"), &got, &len);
                say(self, "%d", missing);
                return LIFELINE_OK;
            }
            """)
        #expect(logs(try run("0s launch\n1s terminate", [plugin])) == ["5 5 5", "5 5 5", "5 5 5", "5 5 5", "4"])
    }

    // MARK: - Strings, the store, files

    @Test func nulBytes_inKeysValuesFileNamesAndLogLines_crossBothWays() throws {
        let plugin = try NativeBuild.plugin(
            "nul",
            """
            static const char key[] = "a\\0b", value[] = "x\\0y\\0", data[] = "\\0\\1\\2\\0";
            INIT {
                int set = api->store_set(self, key, sizeof key - 1, value, sizeof value - 1);
                const char *got;
                size_t len;
                int get = api->store_get(self, key, sizeof key - 1, &got, &len);
                int same = get == 0 && len == sizeof value - 1 && memcmp(got, value, len) == 0;
                int other = api->store_get(self, "a", 1, &got, &len);
                int write = api->file_write(self, S("blob"), data, sizeof data - 1);
                int read = api->file_read(self, S("blob"), &got, &len);
                int same_file = read == 0 && len == sizeof data - 1 && memcmp(got, data, len) == 0;
                const char *names;
                api->file_list(self, &names, &len);
                say(self, "%d %d %d %d %d %d %d list=%zu:%s", set, get, same, other, write, read, same_file, len, names);
                api->log(self, LIFELINE_LOG_WARNING, S("before\\0after"));
                int del = api->store_delete(self, key, sizeof key - 1);
                int again = api->store_delete(self, key, sizeof key - 1);
                int removed = api->file_remove(self, S("blob"));
                int gone = api->file_read(self, S("blob"), &got, &len);
                say(self, "%d %d %d %d", del, again, removed, gone);
                return LIFELINE_OK;
            }
            """)
        let recorder = try run("0s launch\n1s terminate", [plugin])
        #expect(logs(recorder) == ["0 0 1 4 0 0 1 list=5:blob", "before\0after", "0 4 0 4"])
    }

    // MARK: - Scheduled tasks and completions

    @Test func aScheduledTask_runsItsHandler_andCompletesOrExpires() throws {
        let plugin = try NativeBuild.plugin(
            "scheduled",
            """
            static uint64_t running;
            static int expired(lifeline_plugin *self, void *u) {
                (void)u;
                say(self, "expiring");
                return api->set_task_completed(self, running, 0);
            }
            static int refresh(lifeline_plugin *self, const lifeline_task *task, void *u) {
                (void)u;
                say(self, "run %.*s kind %d", (int)task->identifier_len, task->identifier, task->kind);
                running = task->id;
                if (api->set_task_expiration(self, task->id + 1000, expired, NULL) != LIFELINE_ERR_NOT_FOUND) return 9;
                if (task->kind == LIFELINE_TASK_REFRESH) return api->set_task_completed(self, task->id, 1);
                return api->set_task_expiration(self, task->id, expired, NULL);
            }
            static int fetch(lifeline_plugin *self, const lifeline_event *e, void *u) {
                (void)u;
                int first = api->complete_fetch(self, e->completion, LIFELINE_FETCH_NEW_DATA);
                int again = api->complete_fetch(self, e->completion, LIFELINE_FETCH_NEW_DATA);
                say(self, "fetch %d %d", first, again);
                return LIFELINE_OK;
            }
            INIT {
                api->register_task(self, S("com.example.refresh"), refresh, NULL);
                api->register_task(self, S("com.example.clean"), refresh, NULL);
                int denied = api->register_task(self, S("com.example.other"), refresh, NULL);
                say(self, "denied %d", denied);
                api->subscribe(self, S("performFetch"), fetch, NULL, NULL);
                api->submit_task(self, S("com.example.refresh"), LIFELINE_TASK_REFRESH, 0, 0);
                api->submit_task(self, S("com.example.clean"), LIFELINE_TASK_PROCESSING, 0, LIFELINE_REQUIRES_POWER);
                return LIFELINE_OK;
            }
            """,
            toml: "[background]\nidentifiers = [\"com.example.refresh\", \"com.example.clean\"]\n")
        let recorder = try run(
            """
            0s launch
            1s background
            5s run-tasks com.example.refresh
            10s fetch
            15s charging on
            20s run-tasks com.example.clean
            10m foreground
            """, [plugin])
        let said = logs(recorder)
        #expect(said.first == "denied 5")
        #expect(said.contains("run com.example.refresh kind 0"))
        #expect(said.contains("fetch 0 4"))
        #expect(said.contains("run com.example.clean kind 1"))
        #expect(said.contains("expiring"))
        #expect(pluginErrors(recorder).isEmpty)
    }

    // MARK: - Loading

    @Test func anInitThatFails_isALoadFailure_withItsMessage() throws {
        let plugin = try NativeBuild.plugin(
            "noinit", "INIT { api->fail(self, S(\"no config\")); return LIFELINE_ERR_ARGUMENT; }")
        #expect(throws: LifelineError.self) { try run("0s launch\n1s terminate", [plugin]) }
        do {
            _ = try run("0s launch\n1s terminate", [plugin])
        } catch let error as LifelineError {
            #expect(error.message.contains("no config"))
            #expect(error.exitCode == 65)
        }
    }

    @Test func aRebuiltLibrary_isLoadedAnew_thoughDlopenKeepsTheOldImageOfAPath() throws {
        let root = try NativeBuild.folder()
        let first = try NativeBuild.plugin("rebuilt", "INIT { say(self, \"first build\"); return 0; }", root: root)
        #expect(logs(try run("0s launch\n1s terminate", [first])) == ["first build"])
        let second = try NativeBuild.plugin("rebuilt", "INIT { say(self, \"second build, longer\"); return 0; }", root: root)
        #expect(logs(try run("0s launch\n1s terminate", [second])) == ["second build, longer"])
        #expect(logs(try run("0s launch\n1s terminate", [first])) == ["second build, longer"])
        // The copy opened for the rebuilt library is gone once it is loaded.
        let left = (try? FileManager.default.contentsOfDirectory(atPath: NativeLibrary.copiesFolder)) ?? []
        #expect(!left.contains { $0.hasSuffix("-rebuilt.so") }, "\(left)")
    }

    @Test func theBuiltInHeader_isTheSourcesHeader_andIncludeDirHoldsIt() throws {
        let onDisk = try String(contentsOfFile: NativeBuild.includeDirectory + "/lifeline_plugin.h", encoding: .utf8)
        #expect(NativeHeader.text == onDisk)
        #expect(try NativeHeader.includeDirectory() == NativeBuild.includeDirectory)
    }

    /// A lifeline whose sources are gone (or differ) writes the header it was built with to the
    /// cache once, and prints that folder; cc builds a plugin against it.
    @Test func includeDir_withoutTheSources_writesTheBuiltInHeaderToTheCache() throws {
        let root = try NativeBuild.folder()
        let dir = try NativeHeader.includeDirectory(sources: root + "/no-sources", cache: root + "/cache")
        #expect(dir.hasPrefix(root + "/cache/lifeline/include-v1-"))
        #expect(try String(contentsOfFile: dir + "/lifeline_plugin.h", encoding: .utf8) == NativeHeader.text)
        #expect(try NativeHeader.includeDirectory(sources: root + "/no-sources", cache: root + "/cache") == dir)
        try "/* an older header */".write(toFile: root + "/lifeline_plugin.h", atomically: true, encoding: .utf8)
        #expect(try NativeHeader.includeDirectory(sources: root, cache: root + "/cache") == dir)
    }

    /// The table says its version and size, and LIFELINE_API_HAS sees every function of this ABI.
    @Test func theTable_carriesItsVersionAndSize_forPluginsOfOtherVersions() throws {
        let plugin = try NativeBuild.plugin(
            "sizes",
            """
            INIT {
                say(self, "v%u size %s has %d", api->version, api->size == sizeof(lifeline_api) ? "right" : "wrong",
                    LIFELINE_API_HAS(api, complete_fetch) && LIFELINE_API_HAS(api, last_error));
                return LIFELINE_OK;
            }
            """)
        #expect(logs(try run("0s launch\n1s terminate", [plugin])) == ["v1 size right has 1"])
    }

    @Test func manifest_native_isAPathInsideTheFolder() throws {
        func error(_ toml: String) -> String? {
            do {
                _ = try PluginManifest.parse(toml, fileName: "p/plugin.toml")
                return nil
            } catch { return error.message }
        }
        #expect(try PluginManifest.parse("native = \"lib/x.so\"", fileName: "t").nativeLibrary == "lib/x.so")
        #expect(error("native = \"/usr/lib/x.so\"")?.hasPrefix("p/plugin.toml:1: native = \"/usr/lib/x.so\" is an absolute path") == true)
        #expect(error("native = \"../other/x.so\"")?.hasPrefix("p/plugin.toml:1: native = \"../other/x.so\" leads out") == true)
        #expect(error("native = \"a/../../x.so\"")?.contains("leads out of the plugin's folder") == true)
        #expect(error("native = \"\"")?.hasPrefix("p/plugin.toml:1: native must name a shared library") == true)
        #expect(error("native = 3")?.hasPrefix("p/plugin.toml:1: native must be a string") == true)
        #expect(error("swift = \"heartbeat\"\nnative = \"x.so\"")?.hasPrefix("p/plugin.toml:2: swift = \"heartbeat\" and native") == true)
    }

    /// `[config]` and `[limits] memory` are refused for a native plugin, not ignored: it has no
    /// call that reads config, and no cap can hold for its memory. Both were silently accepted.
    @Test func configAndAMemoryLimit_areRefused_notIgnored() throws {
        let body = "INIT { (void)self; return LIFELINE_OK; }"
        let configured = try NativeBuild.plugin("configured", body, toml: "[config]\nretries = 3\n")
        #expect(throws: LifelineError.self) { _ = try configured.make() }
        do { _ = try configured.make() } catch {
            #expect(error.message.hasSuffix("/configured/plugin.toml:3: [config]: a native plugin cannot read [config] (the C api has no call for it); remove the table, and build the values into the library or keep them in its files"), "\(error.message)")
            #expect(error.exitCode == 65)
        }
        let capped = try NativeBuild.plugin("capped", body, toml: "[limits]\nmemory = \"8MiB\"\n")
        do {
            _ = try capped.make()
            Issue.record("a memory limit was accepted")
        } catch {
            #expect(error.message.contains("/capped/plugin.toml:3: [limits] memory: a native plugin's memory cannot be capped"), "\(error.message)")
        }
        // An empty [config] table and the other limits are fine.
        let plain = try NativeBuild.plugin("plain", body, toml: "[config]\n[limits]\nstore = \"1MiB\"\nfiles = \"1MiB\"\n")
        #expect(logs(try run("0s launch\n1s terminate", [plain])).isEmpty)
    }

    @Test func aMissingLibrary_orOneOutsideTheFolder_failsToLoadAtItsLine() throws {
        let root = try NativeBuild.folder()
        let folder = root + "/gone"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let manifest = try PluginManifest.parse("description = \"x\"\nnative = \"gone.so\"", fileName: folder + "/plugin.toml")
        let missing = NativePlugins.descriptor(name: "gone", folder: folder, manifest: manifest)
        #expect(throws: LifelineError.badInput("\(folder)/plugin.toml:2: native = \"gone.so\": no such file (build it first, as in cc -shared -fPIC -I\"$(lifeline --include-dir)\" …)")) {
            _ = try missing.make()
        }
        try FileManager.default.createSymbolicLink(atPath: folder + "/gone.so", withDestinationPath: "/usr/lib/x86_64-linux-gnu/libc.so.6")
        #expect(throws: LifelineError.badInput("\(folder)/plugin.toml:2: native = \"gone.so\" leads outside the plugin's folder (through a link); a plugin's files must be inside its own folder")) {
            _ = try missing.make()
        }
    }
}

/// Simulates `scenario` with the plugins' log lines kept in the report (a quiet logger's level
/// would drop them).
func run(_ scenario: String, _ plugins: [PluginDescriptor]) throws -> Recorder {
    try simulate(scenario, plugins, logger: capturingLogger(Shared([])))
}

/// The plugin's log lines, in order.
func logs(_ recorder: Recorder) -> [String] {
    recorder.timeline.filter { $0.event == "log" }.compactMap { event in
        event.fields.first { $0.0 == "message" }?.1.stringValue
    }
}

/// Builds native plugins from C with the system's cc, as a plugin author would.
enum NativeBuild {
    static var packageRoot: String {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }

    static var includeDirectory: String { packageRoot + "/Sources/CLifelinePlugin/include" }

    /// What every test plugin starts with: the api kept, `S("text")` for pointer and length,
    /// `say` for a formatted log line, and `INIT` for the entry point's signature.
    static let prelude = """
        #include <lifeline_plugin.h>
        #include <stdarg.h>
        #include <stdio.h>
        #include <string.h>
        LIFELINE_PLUGIN_EXPORT_ABI;
        static const lifeline_api *api;
        #define S(t) t, sizeof(t) - 1
        __attribute__((unused, format(printf, 2, 3))) static void say(lifeline_plugin *self, const char *format, ...) {
            char line[512];
            va_list args;
            va_start(args, format);
            int n = vsnprintf(line, sizeof line, format, args);
            va_end(args);
            api->log(self, LIFELINE_LOG_INFO, line, (size_t)n);
        }
        static int plugin_init(lifeline_plugin *self);
        int lifeline_plugin_init(const lifeline_api *host, lifeline_plugin *self) { api = host; return plugin_init(self); }
        #define INIT static int plugin_init(lifeline_plugin *self)

        """

    /// A fresh folder, removed when the process ends is not needed: the system's temporary folder
    /// is cleaned by the system, and a loaded library must stay on disk while it is mapped.
    static func folder() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("lifeline-native-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Compiles `body` (after the prelude) into ROOT/NAME/NAME.so, writes plugin.toml, and returns
    /// the plugin's descriptor.
    static func plugin(_ name: String, _ body: String, toml: String = "", root: String? = nil, raw: Bool = false) throws
        -> PluginDescriptor
    {
        let folder = try (root ?? folder()) + "/" + name
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let manifestText = "native = \"\(name).so\"\n" + toml
        try manifestText.write(toFile: folder + "/plugin.toml", atomically: true, encoding: .utf8)
        try compile((raw ? "" : prelude) + body, to: folder + "/\(name).so")
        let manifest = try PluginManifest.parse(manifestText, fileName: folder + "/plugin.toml")
        return NativePlugins.descriptor(name: name, folder: folder, manifest: manifest)
    }

    /// cc -shared -fPIC -I<header folder>: warnings are errors, so a test plugin is correct C.
    static func compile(_ source: String, to library: String) throws {
        let c = library + ".c"
        try source.write(toFile: c, atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["cc", "-shared", "-fPIC", "-Wall", "-Werror", "-I", includeDirectory, c, "-o", library + ".tmp", "-lpthread"]
        // Into a file, not a pipe: reading a pipe fails with EINTR when a signal arrives.
        FileManager.default.createFile(atPath: library + ".log", contents: nil)
        process.standardError = FileHandle(forWritingAtPath: library + ".log")
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            let output = (try? String(contentsOfFile: library + ".log", encoding: .utf8)) ?? ""
            throw PluginFailure(text: "cc failed:\n" + output)
        }
        // Renamed into place: a new file (a new inode), as a build that replaces a library makes.
        guard rename(library + ".tmp", library) == 0 else { throw PluginFailure(text: "cannot rename \(library)") }
    }
}
