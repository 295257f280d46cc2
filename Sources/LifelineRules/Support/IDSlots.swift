/// Values under ids that only grow, kept in id order: finding one is a binary search, and
/// removing one is O(1) amortized, in whatever order they go.
///
/// A removed value leaves a hole until the next compaction. Holes at either end go at once:
/// values often go in the order they came (timers of one delay; tasks that many plugins began in
/// turn, each ended a while later) or in the reverse (nested tasks; a task begun and ended in one
/// handler). The front is an offset into the array, so dropping from it moves nothing until the
/// dropped part is half the array; the front and the back are looked at before the search. (A
/// `Deque` of the same elements cost a type-metadata lookup on every access.)
///
/// Background tasks and timers keep theirs here: a table keyed by id cost two hashed operations
/// for each, and a list searched from the front grew with every value still there.
///
/// Every member is inlinable: the type sits in LifelineRules (the task registry keeps its tasks
/// here), and its users in the core and the bridge must specialize it for their values. Called
/// through a module boundary unspecialized, each operation went through the generic metadata of
/// its value (`background.lua` cost 69 % more instructions).
@usableFromInline package struct IDSlots<Value> {
    @inlinable package init() {}

    @usableFromInline struct Slot {
        @usableFromInline var id: Int
        @usableFromInline var value: Value?

        @inlinable init(id: Int, value: Value?) {
            self.id = id
            self.value = value
        }
    }

    /// The slots from `head` on are in use; the ones before it were dropped from the front.
    @usableFromInline var slots: [Slot] = []
    @usableFromInline var head = 0
    /// The values that are not holes.
    @usableFromInline package internal(set) var count = 0
    /// The slots in use, holes included.
    @inlinable package var slotCount: Int { slots.count - head }

    /// Adds `value` under `id`, which must be greater than every id added before.
    @inlinable package mutating func append(_ id: Int, _ value: Value) {
        assert(slots.count == head || slots[slots.count - 1].id < id, "ids must grow")
        slots.append(Slot(id: id, value: value))
        count += 1
    }

    /// Adds `value` under `id`, which no value has; in id order, wherever it falls (an append when
    /// `id` is the greatest).
    @inlinable package mutating func insert(_ id: Int, _ value: Value) {
        guard slots.count > head, slots[slots.count - 1].id > id else { return append(id, value) }
        var low = head, high = slots.count
        while low < high {
            let mid = (low + high) / 2
            if slots[mid].id < id { low = mid + 1 } else { high = mid }
        }
        precondition(slots[low].id != id, "id \(id) is there already")
        slots.insert(Slot(id: id, value: value), at: low)
        count += 1
    }

    /// The value under `id`, if it is there.
    @inlinable package subscript(id: Int) -> Value? { value(id) }

    /// The value under `id`, if it is there.
    @inlinable package func value(_ id: Int) -> Value? {
        guard let index = index(of: id) else { return nil }
        return slots[index].value
    }

    /// Whether a value is under `id`.
    @inlinable package func contains(_ id: Int) -> Bool {
        guard let index = index(of: id) else { return false }
        return !isHole(index)
    }

    /// Removes the value under `id` and returns it; nil if there is none.
    @discardableResult
    @inlinable package mutating func remove(_ id: Int) -> Value? {
        guard let index = index(of: id), let value = slots[index].value.take() else { return nil }
        count -= 1
        if index == slots.count - 1 {
            // The newest went: it and the holes before it go now.
            repeat { slots.removeLast() } while slots.count > head && isHole(slots.count - 1)
            if slots.count == head, head > 0 { removeAll() }
        } else if index == head {
            // The oldest went: it and the holes after it go now (the last slot is not a hole).
            repeat { head += 1 } while isHole(head)
            if head > 16, head * 2 > slots.count {
                slots.removeFirst(head)
                head = 0
            }
        } else if slots.count - head > 2 * count + 16 {
            slots.removeFirst(head)
            head = 0
            slots.removeAll { $0.value == nil }
        }
        return value
    }

    /// Changes the value under `id` in place, if it is there; returns what `change` returns.
    @inlinable package mutating func update<R>(_ id: Int, _ change: (inout Value) -> R) -> R? {
        guard let index = index(of: id), !isHole(index) else { return nil }
        return change(&slots[index].value!)
    }

    /// Changes every value in place, in id order.
    @inlinable package mutating func updateAll(_ change: (inout Value) -> Void) {
        for index in head..<slots.count where !isHole(index) { change(&slots[index].value!) }
    }

    /// The values, in id order.
    @inlinable package var values: [Value] { slots[head...].compactMap(\.value) }

    /// The ids and values, in id order.
    @inlinable package var entries: [(id: Int, value: Value)] { slots[head...].compactMap { slot in slot.value.map { (slot.id, $0) } } }

    /// Whether any value satisfies `test`.
    @inlinable package func contains(where test: (Value) -> Bool) -> Bool {
        (head..<slots.count).contains { index in
            switch slots[index].value {
            case .none: false
            case .some(let value): test(value)
            }
        }
    }

    @inlinable package mutating func removeAll() {
        slots.removeAll(keepingCapacity: true)
        head = 0
        count = 0
    }

    /// Whether the slot at `index` is a hole. A switch reads the optional in place, where
    /// `== nil` copied the value (retaining what it holds) to compare it.
    @inlinable func isHole(_ index: Int) -> Bool {
        switch slots[index].value {
        case .none: true
        case .some: false
        }
    }

    /// Where `id` is in `slots`, a hole or not, if it is there.
    @inlinable func index(of id: Int) -> Int? {
        let n = slots.count
        guard n > head else { return nil }
        if slots[head].id == id { return head }
        if slots[n - 1].id == id { return n - 1 }
        var low = head, high = n
        while low < high {
            let mid = (low + high) / 2
            if slots[mid].id < id { low = mid + 1 } else { high = mid }
        }
        return low < n && slots[low].id == id ? low : nil
    }
}

extension IDSlots: Sendable where Value: Sendable {}
extension IDSlots.Slot: Sendable where Value: Sendable {}
