/// A plugin of one launch, as the host's components know it: its slot in the launch's roster, its
/// name, and the launch it was loaded into. A value that keeps nothing alive: a ref of an older
/// launch, or of a plugin that failed to load, is simply no longer current (`AppSession.isCurrent`).
///
/// Components take a ref, never the plugin's context: what they need of a plugin is who it is,
/// and the roster answers the rest (`AppSession.permissions(of:)`, `GuardedCaller.stop`).
package struct PluginRef: Hashable, Sendable {
    /// Its slot in `AppSession.plugins`, in load order.
    package let slot: Int
    package let name: String
    /// The launch (`AppSession.generation`) it belongs to.
    package let generation: Int

    package init(slot: Int, name: String, generation: Int) {
        self.slot = slot
        self.name = name
        self.generation = generation
    }
}
