import Testing

@testable import LifelineRules

// The ordinals are written out as switches, so dispatch reads them with a jump; these tests hold
// them to what they mean: each case's position in `allCases`. A case added, moved or numbered
// twice fails here, not as a handler called for the wrong event.

@Test func lifecycleEventName_ordinal_isItsPositionInAllCases() {
    let all = LifecycleEventName.allCases
    for event in all {
        #expect(event.ordinal == all.firstIndex(of: event), "\(event)")
    }
    #expect(all.map(\.ordinal) == Array(0..<all.count))
}

@Test func appState_ordinal_isItsPositionInAllCases() {
    let all = AppState.allCases
    for state in all {
        #expect(state.ordinal == all.firstIndex(of: state), "\(state)")
    }
    #expect(all.map(\.ordinal) == Array(0..<all.count))
}

/// A watchdog termination's reason names the code that overran in plain words.
@Suite struct WatchdogReasonTests {
    @Test func anEventHandler_isCalledAHandler_andAnExpirationHandlerIsNotCalledOneTwice() {
        let event = Termination.watchdog(
            plugin: "p", handler: "didEnterBackground", limit: 5, time: HostTime(nanoseconds: 0), traceback: nil)
        #expect(event.reason == "plugin 'p' was still running its didEnterBackground handler when the 5 s watchdog limit passed")
        for name in ["expiration handler", "expirationHandler"] {
            let expiring = Termination.watchdog(
                plugin: "p", handler: name, limit: 1, time: HostTime(nanoseconds: 0), traceback: nil)
            #expect(expiring.reason == "plugin 'p' was still running its \(name) when the 1 s watchdog limit passed")
        }
    }
}
