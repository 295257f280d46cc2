import Testing

@testable import Lifeline
@testable import LifelineRules

// IDSlots against a plain dictionary: the same values under the same ids, in id order, whatever
// order they are removed in.

/// Applies `steps` random operations to both, checking after each one; `removal` picks which
/// present id a removal takes.
private func check(seed: UInt64, steps: Int, removal: (inout SplitMix64, [Int]) -> Int) {
    var random = SplitMix64(seed: seed)
    var slots = IDSlots<String>()
    var model: [Int: String] = [:]
    var nextID = 1
    for step in 0..<steps {
        let present = model.keys.sorted()
        if present.isEmpty || random.next() % 100 < 55 {
            let id = nextID
            nextID += Int(random.next() % 3) + 1  // ids grow, with gaps
            slots.append(id, "v\(id)")
            model[id] = "v\(id)"
        } else {
            let id = removal(&random, present)
            #expect(slots.remove(id) == model.removeValue(forKey: id), "step \(step)")
            #expect(slots.remove(id) == nil, "removing \(id) twice")
        }
        // An id never added, between two that were, is not found.
        #expect(slots[nextID + 7] == nil)
        #expect(slots.count == model.count)
        #expect(slots.slotCount <= 2 * model.count + 17)
        #expect(slots.values == model.keys.sorted().map { model[$0]! })
        if !present.isEmpty {
            let probe = present[Int(random.next() % UInt64(present.count))]
            #expect(slots[probe] == model[probe])
            #expect(slots.contains(probe) == (model[probe] != nil))
        }
    }
}

@Test func idSlots_removingAnyAtRandom_matchesADictionary() {
    check(seed: 1, steps: 3000) { random, present in present[Int(random.next() % UInt64(present.count))] }
}

@Test func idSlots_removingTheOldestFirst_matchesADictionary() {
    check(seed: 2, steps: 3000) { _, present in present[0] }
}

@Test func idSlots_removingTheNewestFirst_matchesADictionary() {
    check(seed: 3, steps: 3000) { _, present in present[present.count - 1] }
}

@Test func idSlots_updateChangesOnlyAPresentValue() {
    var slots = IDSlots<Int>()
    for id in 1...5 { slots.append(id, id * 10) }
    slots.remove(3)
    #expect(slots.update(2) { $0 += 1; return $0 } == 21)
    #expect(slots.update(3) { $0 += 1; return $0 } == nil)
    slots.updateAll { $0 = -$0 }
    #expect(slots.entries.map(\.id) == [1, 2, 4, 5])
    #expect(slots.values == [-10, -21, -40, -50])
    #expect(slots.contains { $0 == -40 })
    #expect(!slots.contains { $0 == -30 })
}

/// A host that began and ended many tasks in turn keeps no slot for the ended ones.
@Test func idSlots_removingInTheOrderAdded_keepsNoHoles() {
    var slots = IDSlots<Int>()
    for id in 1...1000 { slots.append(id, id) }
    for id in 1...1000 {
        slots.remove(id)
        slots.append(1000 + id, id)
    }
    #expect(slots.count == 1000)
    #expect(slots.slotCount == 1000)
    #expect(slots.entries.first?.id == 1001)
    for id in (1501...2000).reversed() { slots.remove(id) }
    #expect(slots.slotCount == 500)
}

@Test func idSlots_insertKeepsIdOrderWhereverTheIdFalls() {
    var slots = IDSlots<Int>()
    for id in [2, 4, 8] { slots.insert(id, id) }
    slots.insert(6, 6)
    slots.insert(1, 1)
    slots.insert(9, 9)
    #expect(slots.entries.map(\.id) == [1, 2, 4, 6, 8, 9])
    #expect(slots[6] == 6)
    #expect(slots.remove(1) == 1)
    slots.insert(3, 3)
    #expect(slots.values == [2, 3, 4, 6, 8, 9])
    #expect(slots.count == 6)
}
