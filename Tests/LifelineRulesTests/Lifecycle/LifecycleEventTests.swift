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
