import AppleSamplesPlugin
import HeartbeatPlugin
import LifelineCLI

// The `lifeline` binary: the whole command line, with the bundled Swift plugins compiled in. A
// package of one's own does the same with its own plugins (docs/swift-api.md).
await Lifeline.main(swiftPlugins: [Heartbeat.self, AppleSamples.self])
