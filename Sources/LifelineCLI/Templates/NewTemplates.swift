/// What `lifeline new` writes, as text. Each kind's plugin does the same small thing, the thing
/// every plugin of a real app does: when the app leaves the foreground it finishes its work inside
/// a background task, and ends that task on every path, exactly once. Its scenarios hold it to
/// them: `basic` (the work is done in time), `expired` (the system's time runs out first, and the
/// expiration handler ends the task) and `twice` (two trips to the background at once, each task
/// ended by its own work). They pass as written, so `lifeline test` is green at once and a change
/// that breaks a path turns it red.
enum NewTemplates {
    /// One file of a new plugin: its path inside the plugin's folder, and its text.
    struct File {
        var path: String
        var text: String
    }

    /// How long the template's work takes, in seconds; the scenarios' times follow from it.
    static let workSeconds = 2

    // MARK: - Lua

    static func lua(_ name: String) -> [File] {
        [
            File(path: "init.lua", text: luaInit(name)),
            File(path: "plugin.toml", text: luaManifest(name)),
        ] + scenarios(name)
    }

    static func luaInit(_ name: String) -> String {
        """
        -- \(name): when the app leaves the foreground, it finishes its work inside a background
        -- task. The task ends on every path, exactly once: when the work is done, when the work
        -- raises an error, and from the expiration handler when the system's time runs out first.

        -- How long the work takes, in seconds (plugin.toml's [config]).
        local seconds = lifeline.config.seconds or \(workSeconds)
        local runs = 0

        -- The work itself: put yours here. It may raise an error; the task still ends.
        local function work()
          runs = runs + 1
          return "saved (run " .. runs .. ")"
        end

        lifeline.on("didEnterBackground", function()
          local id, timer, ended = 0, nil, false
          -- Ends the task once, whichever path gets here first.
          local function finish(why)
            if ended then return end
            ended = true
            if timer then timer:cancel() end
            lifeline.log.info(why)
            lifeline.endBackgroundTask(id)
          end
          id = lifeline.beginBackgroundTask("\(name)", function() finish("out of time: stopped early") end)
          -- The handler returns at once (one that blocks trips the watchdog); the work runs
          -- later, from a timer, inside the task.
          timer = lifeline.after(seconds, function()
            timer = nil
            local ok, result = pcall(work)
            finish(ok and result or ("failed: " .. tostring(result)))
          end)
        end)

        """
    }

    static func luaManifest(_ name: String) -> String {
        """
        version = "0.1.0"
        description = "Finishes its work in a background task that ends on every path."

        [config]
        # How long the work takes, in seconds.
        seconds = \(workSeconds)

        """
    }

    // MARK: - Scenarios (the same for every kind: the plugins behave alike)

    /// The three scenarios every kind gets: the work done in time, the time running out first,
    /// and two trips to the background at once, each task ended by its own work.
    static func scenarios(_ name: String) -> [File] {
        [
            File(path: "scenarios/basic.scenario", text: basicScenario(name)),
            File(path: "scenarios/expired.scenario", text: expiredScenario(name)),
            File(path: "scenarios/twice.scenario", text: twiceScenario(name)),
        ]
    }

    static func basicScenario(_ name: String) -> String {
        """
        # The user leaves the app: the work is done inside its task, which ends after
        # \(workSeconds) seconds, and then the app suspends. Run it with `lifeline test`.
        0s     launch
        5s     background
        20s    foreground
        30s    terminate

        # What must happen: the task lasts the work's \(workSeconds) seconds and ends in time.
        expect outcome completed
        expect taskBegan plugin=\(name) name=\(name) at 5s
        expect taskEnded plugin=\(name) name=\(name) expired=false at \(5 + workSeconds)s
        expect log plugin=\(name) contains "saved (run 1)"
        expect no taskExpiring
        expect suspended at \(5 + workSeconds)s

        """
    }

    static func expiredScenario(_ name: String) -> String {
        """
        # The system gives less time than the work needs: with a 6 s budget, the expiration
        # handler runs 1 s after the app leaves the foreground (6 s less the 5 s lead). It ends
        # the task, so the app suspends instead of being terminated, and the work never runs.
        limit budget 6s
        0s     launch
        5s     background
        20s    foreground
        30s    terminate

        expect outcome completed
        expect taskExpiring plugin=\(name) name=\(name) at 6s
        expect taskEnded plugin=\(name) name=\(name) expired=true at 6s
        expect log plugin=\(name) contains "out of time"
        expect no log plugin=\(name) contains "saved"
        expect suspended at 6s

        """
    }

    static func twiceScenario(_ name: String) -> String {
        """
        # The user leaves, comes back and leaves again at once: two tasks run together, and each
        # ends when its own work is done. A plugin that kept its task in one variable for both
        # trips would end the second task twice and the first never: the app would not suspend.
        0s     launch
        5s     background
        6s     foreground
        6s     background
        20s    foreground
        30s    terminate

        expect outcome completed
        expect taskEnded plugin=\(name) name=\(name) expired=false at \(5 + workSeconds)s
        expect taskEnded plugin=\(name) name=\(name) expired=false at \(6 + workSeconds)s
        expect taskEnded plugin=\(name) times 2
        expect log plugin=\(name) contains "saved (run 2)"
        expect no taskExpiring
        expect suspended at \(6 + workSeconds)s

        """
    }

    // MARK: - Swift

    /// The Swift package: a plugin target, an executable that is lifeline with the plugin in it,
    /// and the plugin folder (plugin.toml, scenarios) at the package's root.
    static func swift(_ name: String, typeName: String, executable: String, checkout: String) -> [File] {
        [
            File(path: "README.md", text: swiftReadme(name, executable: executable)),
            File(
                path: "Package.swift",
                text: swiftManifest(name, typeName: typeName, executable: executable, checkout: checkout)),
            File(path: "plugin.toml", text: swiftPluginManifest(name)),
            File(path: ".gitignore", text: "/.build/\n/.swiftpm/\n"),
            File(path: "Sources/\(typeName)Plugin/\(typeName).swift", text: swiftPlugin(name, typeName: typeName)),
            File(path: "Sources/\(executable)/main.swift", text: swiftMain(name, typeName: typeName)),
        ] + scenarios(name)
    }

    static func swiftReadme(_ name: String, executable: String) -> String {
        """
        # \(name)

        A Swift plugin for Lifeline, and a package that builds its own `lifeline` with it compiled in:
        `\(executable)`, which has every subcommand of `lifeline`. This folder is also a plugin folder:
        plugin.toml asks for the Swift plugin `\(name)`, and scenarios/ holds its tests. From here:

            swift build       # the first build takes several minutes
            swift run \(executable) test ..
            swift run \(executable) simulate --plugins .. --only \(name) --scenario scenarios/basic.scenario

        `test ..` runs every scenario of the plugins folder this one is in; `simulate` prints one
        scenario's report.

        Package.swift names the checkout of Lifeline it builds against, at its top.

        """
    }

    static func swiftManifest(_ name: String, typeName: String, executable: String, checkout: String) -> String {
        """
        // swift-tools-version:6.0
        import PackageDescription

        // The checkout of Lifeline this package builds against (`lifeline new --swift` wrote the one
        // its lifeline was built from). SwiftPM knows a package on a path by the path's last name.
        let lifelinePath = \(swiftLiteral(checkout))
        let lifeline = String(lifelinePath.split(separator: "/").last ?? "lifeline")

        let package = Package(
            name: \(swiftLiteral(name)),
            products: [
                // `swift run \(executable) …`: the whole lifeline command line, with this plugin in it.
                .executable(name: \(swiftLiteral(executable)), targets: [\(swiftLiteral(executable))]),
            ],
            dependencies: [.package(path: lifelinePath)],
            targets: [
                // The plugin: Swift against the Lifeline module.
                .target(
                    name: \(swiftLiteral(typeName + "Plugin")),
                    dependencies: [.product(name: "Lifeline", package: lifeline)]),
                // Its host: lifeline's own command line, handed this package's plugins.
                .executableTarget(
                    name: \(swiftLiteral(executable)),
                    dependencies: [
                        \(swiftLiteral(typeName + "Plugin")),
                        .product(name: "LifelineCLI", package: lifeline),
                    ]),
            ],
            swiftLanguageModes: [.v6]
        )

        """
    }

    static func swiftPluginManifest(_ name: String) -> String {
        """
        # This folder asks for the Swift plugin `\(name)`, which this package compiles into its own
        # lifeline (Sources/). A stock lifeline does not have it: build and run this package's.
        swift = "\(name)"
        description = "Finishes its work in a background task that ends on every path."

        """
    }

    static func swiftPlugin(_ name: String, typeName: String) -> String {
        """
        import Lifeline

        /// \(name): when the app leaves the foreground, it finishes its work inside a background
        /// task. The task ends on every path, exactly once: when the work is done, when the work
        /// throws, and from the expiration handler when the system's time runs out first.
        public final class \(typeName): SwiftPlugin {
            public static let name = \(swiftLiteral(name))

            /// How long the work takes, in seconds.
            static let workSeconds = \(workSeconds).0

            private var runs = 0

            public init() {}

            public func load(_ context: PluginContext) throws {
                context.on(.didEnterBackground) { [unowned self] _ in
                    var task = 0, timer = 0
                    // Ends the task once, whichever path gets here first.
                    func finish(_ why: String) {
                        guard task != 0 else { return }
                        context.cancelTimer(timer)
                        context.logger.info("\\(why)")
                        context.endBackgroundTask(task)
                        task = 0
                    }
                    task = context.beginBackgroundTask(\(swiftLiteral(name))) {
                        finish("out of time: stopped early")
                    }
                    // The handler returns at once (one that blocks trips the watchdog); the work
                    // runs later, from a timer, inside the task.
                    timer = context.after(Self.workSeconds) { [unowned self] in
                        do { finish(try work()) } catch { finish("failed: \\(error)") }
                    }
                }
            }

            /// The work itself: put yours here. It may throw; the task still ends.
            private func work() throws -> String {
                runs += 1
                return "saved (run \\(runs))"
            }
        }

        """
    }

    static func swiftMain(_ name: String, typeName: String) -> String {
        """
        import LifelineCLI
        import \(typeName)Plugin

        // This package's own lifeline: the whole command line (simulate, test, run, check, …) with
        // its Swift plugins compiled in. A plugins folder asks for one with `swift = "NAME"` in a
        // plugin.toml, as this package's own folder does for \(name).
        await Lifeline.main(swiftPlugins: [\(typeName).self])

        """
    }

    // MARK: - C

    /// A C plugin over lifeline_plugin.h, its Makefile, and the plugin.toml that names its library.
    static func native(_ name: String) -> [File] {
        [
            File(path: "\(name).c", text: nativeSource(name)),
            File(path: "Makefile", text: nativeMakefile(name)),
            File(path: "plugin.toml", text: nativeManifest(name)),
            File(path: ".gitignore", text: "/\(name).so\n"),
        ] + scenarios(name)
    }

    static func nativeSource(_ name: String) -> String {
        """
        /* \(name): when the app leaves the foreground, it finishes its work inside a background
           task. The task ends on every path, exactly once: when the work is done, when it fails,
           and from the expiration handler when the system's time runs out first.

           No static variables: the library is loaded once per process, so a static would be
           shared by every launch in it (`lifeline explore` runs many at once). What a piece of
           work needs travels in the `user` pointer its callbacks get. */
        #include <lifeline_plugin.h>
        #include <stdio.h>
        #include <stdlib.h>
        #include <string.h>

        LIFELINE_PLUGIN_EXPORT_ABI;

        /* How long the work takes, in seconds. */
        #define WORK_SECONDS \(workSeconds).0

        /* Strings as pointer and length: S("text") gives both. */
        #define S(text) text, sizeof(text) - 1

        /* One entry into the background: its task, and the timer of its work (0 when none). */
        struct job {
            const lifeline_api *api;
            uint64_t task, timer;
        };

        static void say(const lifeline_api *api, lifeline_plugin *self, const char *message) {
            api->log(self, LIFELINE_LOG_INFO, message, strlen(message));
        }

        /* Ends the job's task once, whichever path gets here first, and frees the job: once the
           task has ended and its timer is cancelled, the host calls neither of its callbacks. */
        static int finish(lifeline_plugin *self, struct job *job, const char *why) {
            const lifeline_api *api = job->api;
            if (job->timer != 0) api->cancel_timer(self, job->timer);
            say(api, self, why);
            int status = api->end_task(self, job->task);
            free(job);
            return status;
        }

        static int expired(lifeline_plugin *self, void *user) {
            return finish(self, user, "out of time: stopped early");
        }

        /* The work itself: put yours here. This one counts its runs in the plugin's store. */
        static int work(lifeline_plugin *self, void *user) {
            struct job *job = user;
            const lifeline_api *api = job->api;
            job->timer = 0;
            const char *value;
            size_t len;
            int runs = 0;
            if (api->store_get(self, S("runs"), &value, &len) == LIFELINE_OK) sscanf(value, "%d", &runs);
            char text[32], message[64];
            int n = snprintf(text, sizeof text, "%d", runs + 1);
            if (api->store_set(self, S("runs"), text, (size_t)n) != LIFELINE_OK) {
                const char *why = api->last_error(self, &len);
                snprintf(message, sizeof message, "failed: %.*s", (int)len, why);
                return finish(self, job, message);
            }
            snprintf(message, sizeof message, "saved (run %d)", runs + 1);
            return finish(self, job, message);
        }

        static int entered_background(lifeline_plugin *self, const lifeline_event *event, void *user) {
            (void)event;
            const lifeline_api *api = user;
            struct job *job = calloc(1, sizeof *job);
            if (job == NULL) return LIFELINE_ERR_REFUSED;
            job->api = api;
            int status = api->begin_task(self, S("\(name)"), expired, job, &job->task);
            if (status != LIFELINE_OK) {
                free(job); /* the app is not running it: nothing to end */
                return status;
            }
            /* The handler returns at once (one that blocks trips the watchdog); the work runs
               later, from a timer, inside the task. */
            status = api->after(self, WORK_SECONDS, work, job, &job->timer);
            if (status != LIFELINE_OK) return finish(self, job, "failed: no timer");
            return LIFELINE_OK;
        }

        int lifeline_plugin_init(const lifeline_api *api, lifeline_plugin *self) {
            return api->subscribe(self, S("didEnterBackground"), entered_background, (void *)api, NULL);
        }

        """
    }

    static func nativeMakefile(_ name: String) -> String {
        """
        # Builds \(name).so, the library plugin.toml names, against the header of the lifeline
        # on PATH: `make LIFELINE=path/to/lifeline` names another.
        LIFELINE ?= lifeline
        CFLAGS ?= -O2 -Wall -Wextra
        INCLUDE := $(shell $(LIFELINE) --include-dir)

        all: \(name).so

        # Rebuilt when the header changes too (a newer lifeline).
        \(name).so: \(name).c $(wildcard $(INCLUDE)/lifeline_plugin.h)
        \t$(if $(INCLUDE),,$(error '$(LIFELINE) --include-dir' printed nothing: make LIFELINE=path/to/lifeline))
        \t$(CC) -shared -fPIC $(CFLAGS) -I"$(INCLUDE)" \(name).c -o \(name).so

        clean:
        \trm -f \(name).so

        .PHONY: all clean

        """
    }

    static func nativeManifest(_ name: String) -> String {
        """
        # The library this folder's plugin is: built from \(name).c by the Makefile.
        native = "\(name).so"
        description = "Finishes its work in a background task that ends on every path."

        """
    }

    /// A Swift string literal of `text` (a path may hold quotes or backslashes).
    static func swiftLiteral(_ text: String) -> String {
        var result = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            case "\n": result += "\\n"
            case "\r": result += "\\r"
            case "\t": result += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F {
                    result += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    result.unicodeScalars.append(scalar)
                }
            }
        }
        return result + "\""
    }
}
