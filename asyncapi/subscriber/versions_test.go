package subscriber_test

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/chatmsg/gateway/asyncapi/subscriber"
)

func TestVersionsApply(t *testing.T) {
	t.Parallel()
	steps := []struct {
		name    string
		id      int64
		version int64
		value   string
		applied bool
		held    string // the state of id afterwards
	}{
		{"first event of a record", 1, 2, "sent", true, "sent"},
		{"newer", 1, 4, "read", true, "read"},
		{"older arrives late", 1, 3, "delivered", false, "read"},
		{"retry of the applied one", 1, 4, "read again", false, "read"},
		{"another record is separate", 2, 1, "received", true, "received"},
		{"next after a gap", 1, 6, "edited", true, "edited"},
	}
	v := subscriber.NewVersions[string]()
	for _, st := range steps {
		if got := v.Apply(st.id, st.version, st.value); got != st.applied {
			t.Fatalf("%s: applied %v, want %v", st.name, got, st.applied)
		}
		if cur, ok := v.Get(st.id); !ok || cur.Value != st.held {
			t.Fatalf("%s: holds %+v", st.name, cur)
		}
	}
	if v.Len() != 2 || v.Version(1) != 6 || v.Version(3) != 0 {
		t.Fatalf("len %d, versions %d %d", v.Len(), v.Version(1), v.Version(3))
	}
}

// Many goroutines apply the same versions of a few records in shuffled
// orders: every record ends at its greatest version, whatever the order,
// and exactly one Apply per (record, version) reports true at most.
func TestVersionsConcurrent(t *testing.T) {
	t.Parallel()
	const records, versions, workers = 5, 200, 8
	v := subscriber.NewVersions[int64]()
	var wg sync.WaitGroup
	applied := make([][]int, records)
	var mu sync.Mutex
	for i := range applied {
		applied[i] = make([]int, versions+1)
	}
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 7))
			order := r.Perm(records * versions)
			for _, k := range order {
				id, ver := int64(k%records), int64(k/records+1)
				if v.Apply(id, ver, ver*10) {
					mu.Lock()
					applied[id][ver]++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for id := range int64(records) {
		cur, ok := v.Get(id)
		if !ok || cur.Version != versions || cur.Value != versions*10 {
			t.Fatalf("record %d ends at %+v", id, cur)
		}
		for ver, n := range applied[id] {
			if n > 1 {
				t.Fatalf("record %d version %d applied %d times", id, ver, n)
			}
		}
	}
}
