package subscriber

import "sync"

// Versions keeps the latest state of each record (a message, a
// conversation) built from events that may arrive out of order.
//
// Every omnichat.message.* event carries its message's `version`, every
// omnichat.conversation.* event its conversation's (an extension of the
// API document): an integer that is 1 when the record is created and
// grows by one with each change, in the transaction of the change. The
// AsyncAPI document's rule, "apply an event only if its version is greater
// than the one you hold", is what Apply does: an older event, or a retry
// of one already applied (same version), leaves the held state as it is.
//
// Versions is safe for concurrent use: deliveries are handled in parallel,
// and two events about one record may be applied at the same time; the
// one with the greater version wins whatever the order. Keep one Versions
// per kind of record (message ids and conversation ids are separate
// sequences). It holds everything in memory; a receiver that keeps its
// state in a database does the same with one conditional statement, e.g.
//
//	UPDATE messages SET ..., version = $v WHERE id = $id AND version < $v
//
// (and an INSERT … ON CONFLICT DO UPDATE … WHERE version < excluded.version
// for a record not seen yet).
type Versions[T any] struct {
	mu   sync.RWMutex
	held map[int64]Versioned[T]
}

// Versioned is a record's state with the version it was published with.
type Versioned[T any] struct {
	Version int64
	Value   T
}

// NewVersions returns an empty store.
func NewVersions[T any]() *Versions[T] {
	return &Versions[T]{held: map[int64]Versioned[T]{}}
}

// Apply stores value as the state of record id when version is greater
// than the version held for it (or none is held), and reports whether it
// did. A false answer is not an error: the event is older than, or the
// same as, what the store already has, and is to be acknowledged and
// ignored.
func (v *Versions[T]) Apply(id, version int64, value T) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if cur, ok := v.held[id]; ok && cur.Version >= version {
		return false
	}
	v.held[id] = Versioned[T]{Version: version, Value: value}
	return true
}

// Get returns the state held for record id and whether there is one.
func (v *Versions[T]) Get(id int64) (Versioned[T], bool) {
	v.mu.RLock()
	defer v.mu.RUnlock()
	cur, ok := v.held[id]
	return cur, ok
}

// Version returns the version held for record id, 0 when none is.
func (v *Versions[T]) Version(id int64) int64 {
	cur, _ := v.Get(id)
	return cur.Version
}

// Len reports how many records are held.
func (v *Versions[T]) Len() int {
	v.mu.RLock()
	defer v.mu.RUnlock()
	return len(v.held)
}
