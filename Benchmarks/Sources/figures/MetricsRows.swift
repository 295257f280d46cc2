// watchdog.overhead.scraped: watchdog.overhead with `lifeline run --metrics` on and a scraper
// reading /metrics at 10 Hz over loopback.
import Foundation
import Lifeline
import LifelineLua
import LifelineMetrics
import LifelineTesting

#if canImport(Glibc)
import Glibc
#endif

/// ms per fib(27) handler, as `fibUnderWatchdog`, with everything `--metrics` adds: each call
/// counted and timed for the page (`HostConfiguration.onHandlerCall`), a metrics server on
/// 127.0.0.1, and a scraper that GETs /metrics every 100 ms from its own thread. Each scrape's
/// reading of the host runs between two events, on the bench's thread, as `LiveRun.onMainExecutor`
/// runs it between two jobs.
func fibUnderWatchdogScraped(events: Int) -> Double {
    let dir = tempPlugins(["fib": "\(fibSource)\nlifeline.on('didReceiveMemoryWarning', function() fib(27) end)"])
    defer { try? FileManager.default.removeItem(atPath: dir) }
    let metrics = HostMetrics()
    var configuration = HostConfiguration()
    configuration.onHandlerCall = { metrics.noteHandlerCall(plugin: $0, handler: $1, seconds: $2) }
    let bench = BenchHost(try! LuaPluginLoader.descriptors(in: dir), configuration: configuration)
    let reads = PendingReads()
    let server = try! MetricsServer(address: MetricsAddress(port: 0), metrics: metrics, refresh: { reads.add($0) })
    defer { server.close() }
    let scraper = Scraper(port: server.address.port, every: 0.1)
    let ns = nanoseconds(per: events) {
        for _ in 0..<events {
            bench.perform(.memoryWarning)
            reads.serve { metrics.read(bench.host) }
        }
    }
    scraper.stop()
    bench.checkClean()
    precondition(scraper.scrapes > 0, "the scraper read no page")
    return ns / 1e6
}

func watchdogScrapedRow() -> Row {
    // 20 events a side (about 0.2 s), so each side sees a few scrapes.
    let m = interleaved(rounds: 11, [{ fibUnderWatchdogScraped(events: 20) }, { fibUnderWatchdog(events: 20) }])
    return Row(
        name: "watchdog.overhead.scraped", unit: "ms/handler", value: m[0],
        baseline: ("watchdog.overhead, no metrics", m[1]), target: "≤ 1.02", met: m[0] / m[1] <= 1.02)
}

/// The readings scrapes asked for, taken on the bench's thread between two events.
final class PendingReads: @unchecked Sendable {
    private let lock = NSLock()
    private var waiting: [@Sendable () -> Void] = []

    func add(_ taken: @escaping @Sendable () -> Void) { lock.withLock { waiting.append(taken) } }

    func serve(_ read: () -> Void) {
        let now = lock.withLock { () -> [@Sendable () -> Void] in
            defer { waiting.removeAll() }
            return waiting
        }
        guard !now.isEmpty else { return }
        read()
        for taken in now { taken() }
    }
}

/// GETs /metrics on 127.0.0.1:`port` at once and then every `every` seconds, on its own thread,
/// until stopped.
final class Scraper: @unchecked Sendable {
    private let lock = NSLock()
    private var stopped = false
    private var count = 0
    private let done = DispatchSemaphore(value: 0)

    init(port: Int, every interval: Double) {
        Thread.detachNewThread { [self] in
            while !lock.withLock({ stopped }) {
                // One GET over a fresh connection, as Prometheus makes it.
                let page = try? httpRequest(port: port, path: "/metrics")
                precondition(page?.status == 200 && page?.body.isEmpty == false, "a scrape read nothing")
                lock.withLock { count += 1 }
                usleep(UInt32(interval * 1e6))
            }
            done.signal()
        }
    }

    var scrapes: Int { lock.withLock { count } }

    func stop() {
        lock.withLock { stopped = true }
        done.wait()
    }
}
