// Package clock is the one place that knows the service's time zone and the
// three time formats the API document uses, and it carries the injectable
// "now" so windows, expiries and retry schedules are testable without waiting.
package clock

import (
	"sync"
	"time"
)

// Clock returns the current time. Tests substitute a Manual clock's Now.
type Clock func() time.Time

// System is the real clock, in UTC.
func System() time.Time { return time.Now().UTC() }

// Manual is a clock that moves only when told to: tests pass m.Now as the
// Clock of the code under test and step it across windows, expiries and
// retry schedules instead of waiting. It is safe for concurrent use.
type Manual struct {
	mu  sync.Mutex
	now time.Time
}

// NewManual returns a clock stopped at start (in UTC).
func NewManual(start time.Time) *Manual { return &Manual{now: start.UTC()} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Set moves the clock to t (in UTC), backwards too.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	m.now = t.UTC()
	m.mu.Unlock()
}

// Advance moves the clock forward by d.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	m.now = m.now.Add(d)
	m.mu.Unlock()
}

// Formatter renders times in the service time zone.
type Formatter struct{ Location *time.Location }

// NewFormatter returns a formatter for loc (UTC when nil).
func NewFormatter(loc *time.Location) Formatter {
	if loc == nil {
		loc = time.UTC
	}
	return Formatter{Location: loc}
}

// ManagementLayout is the "YYYY-MM-DD HH:MM:SS" format of management resources.
const ManagementLayout = "2006-01-02 15:04:05"

// Management formats t as "YYYY-MM-DD HH:MM:SS" in the service time zone.
func (f Formatter) Management(t time.Time) string { return t.In(f.Location).Format(ManagementLayout) }

// ManagementPtr is Management for nullable fields.
func (f Formatter) ManagementPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := f.Management(*t)
	return &s
}

// MicroUTC formats t as ISO 8601 UTC with microseconds (the edit response).
func (f Formatter) MicroUTC(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000000Z")
}

// Offset formats t as ISO 8601 with the zone offset (webhook payloads,
// conversation listing, expiries).
func (f Formatter) Offset(t time.Time) string {
	return t.In(f.Location).Format("2006-01-02T15:04:05-07:00")
}

// OffsetPtr is Offset for nullable fields.
func (f Formatter) OffsetPtr(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := f.Offset(*t)
	return &s
}
