import Lifeline
import LifelineBackgroundTasks
import LifelineTesting

// What every test of Apple's names starts from: two scheduled-task identifiers the plugin may
// use, and a Swift plugin whose load runs with Apple's names bound to it.

let refreshID = "com.example.refresh"
let cleanID = "com.example.clean"

/// A Swift plugin named `name` whose load runs `setup` with Apple's names bound to it.
func applePlugin(
    _ name: String = "p", identifiers: [String] = [refreshID, cleanID], _ setup: @escaping (PluginContext) throws -> Void
) -> PluginDescriptor {
    var descriptor = swiftPlugin(name) { context in try context.withAppleNames { try setup(context) } }
    descriptor.taskIdentifiers = identifiers
    return descriptor
}
