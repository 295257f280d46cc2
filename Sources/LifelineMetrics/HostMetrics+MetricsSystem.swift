import CoreMetrics
import Prometheus

extension HostMetrics {
    /// Makes swift-metrics' process-wide system write into this page: a counter, gauge or timer
    /// that a Swift plugin or a library makes with swift-metrics (`Counter(label: "sync_rows")`)
    /// appears on /metrics beside the host's own. Call it once per process (`lifeline run
    /// --metrics` does); swift-metrics allows one bootstrap.
    ///
    /// The `lifeline_` names stay the host's: a swift-metrics label that starts so is served as
    /// `plugin_lifeline_…`, so it can neither clash with a host family nor pose as one.
    public func bootstrapMetricsSystem() {
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.nameAndLabelSanitizer = { name, labels in
            (name.hasPrefix("lifeline_") ? "plugin_" + name : name, labels)
        }
        MetricsSystem.bootstrap(factory)
    }
}
