import DequeModule

/// Values under ids that only grow, kept in id order: finding one is a binary search, and
/// removing one is O(1) amortized, in whatever order they go.
///
/// A removed value leaves a hole until the next compaction. Holes at either end go at once:
/// values often go in the order they came (timers of one delay; tasks that many plugins began in
/// turn, each ended a while later) or in the reverse (nested tasks; a task begun and ended in one
/// handler). A deque drops them from the front as cheaply as from the back, and the front and the
/// back are looked at before the search.
///
/// Background tasks and timers keep theirs here: a table keyed by id cost two hashed operations
/// for each, and a list searched from the front grew with every value still there.
struct IDSlots<Value> {
    private var slots = Deque<(id: Int, value: Value?)>()
    /// The values that are not holes.
    private(set) var count = 0
    /// The slots, holes included.
    var slotCount: Int { slots.count }

    /// Adds `value` under `id`, which must be greater than every id added before.
    mutating func append(_ id: Int, _ value: Value) {
        assert(slots.isEmpty || slots[slots.count - 1].id < id, "ids must grow")
        slots.append((id, value))
        count += 1
    }

    /// The value under `id`, if it is there.
    subscript(id: Int) -> Value? {
        guard let index = index(of: id) else { return nil }
        return slots[index].value
    }

    /// Whether a value is under `id`.
    func contains(_ id: Int) -> Bool {
        guard let index = index(of: id) else { return false }
        return !isHole(index)
    }

    /// Removes the value under `id` and returns it; nil if there is none.
    @discardableResult
    mutating func remove(_ id: Int) -> Value? {
        guard let index = index(of: id), let value = slots[index].value.take() else { return nil }
        count -= 1
        if index == slots.count - 1 {
            repeat { slots.removeLast() } while !slots.isEmpty && isHole(slots.count - 1)
        } else if index == 0 {
            repeat { slots.removeFirst() } while !slots.isEmpty && isHole(0)
        } else if slots.count > 2 * count + 16 {
            slots.removeAll { $0.value == nil }
        }
        return value
    }

    /// Changes the value under `id` in place, if it is there; returns what `change` returns.
    mutating func update<R>(_ id: Int, _ change: (inout Value) -> R) -> R? {
        guard let index = index(of: id), slots[index].value != nil else { return nil }
        return change(&slots[index].value!)
    }

    /// Changes every value in place, in id order.
    mutating func updateAll(_ change: (inout Value) -> Void) {
        for index in slots.indices where !isHole(index) { change(&slots[index].value!) }
    }

    /// The values, in id order.
    var values: [Value] { slots.compactMap(\.value) }

    /// The ids and values, in id order.
    var entries: [(id: Int, value: Value)] { slots.compactMap { slot in slot.value.map { (slot.id, $0) } } }

    /// Whether any value satisfies `test`.
    func contains(where test: (Value) -> Bool) -> Bool {
        slots.indices.contains { index in
            switch slots[index].value {
            case .none: false
            case .some(let value): test(value)
            }
        }
    }

    mutating func removeAll() {
        slots.removeAll()
        count = 0
    }

    /// Whether the slot at `index` is a hole. A switch reads the optional in place, where
    /// `== nil` copied the value (retaining what it holds) to compare it.
    private func isHole(_ index: Int) -> Bool {
        switch slots[index].value {
        case .none: true
        case .some: false
        }
    }

    /// Where `id` is in `slots`, a hole or not, if it is there.
    private func index(of id: Int) -> Int? {
        let n = slots.count
        guard n > 0 else { return nil }
        if slots[0].id == id { return 0 }
        if slots[n - 1].id == id { return n - 1 }
        var low = 0, high = n
        while low < high {
            let mid = (low + high) / 2
            if slots[mid].id < id { low = mid + 1 } else { high = mid }
        }
        return low < n && slots[low].id == id ? low : nil
    }
}

extension IDSlots: Sendable where Value: Sendable {}
