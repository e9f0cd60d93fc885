package loadtest

import (
	"context"
	"fmt"
	"time"
)

// ListingCase is one listing of list-1m under the closed loop.
type ListingCase struct {
	Name       string         `json:"name"`
	Path       string         `json:"path"`
	Latency    Latency        `json:"latency"`
	Throughput float64        `json:"rps"`
	Errors     map[string]int `json:"errors,omitempty"`
	Total      int            `json:"total"` // the envelope's total of the first answer
}

// listingCases are the listings of list-1m: the default, the order by
// last message, a status filter (Pending, 20% of the seeded rows) and the
// text filter matching 2%.
var listingCases = []struct{ name, path string }{
	{"default", "/api/contact-channels"},
	{"orderBy=last_message_at", "/api/contact-channels?orderBy=last_message_at"},
	{"status_id=2", "/api/contact-channels?status_id=2"},
	{"filter=joao", "/api/contact-channels?filter=joao"},
}

// list1M is the company of list-1m and its seeding.
type list1M struct {
	company *Company
	seeded  SeedReport
}

func (r *runner) prepareList1M(ctx context.Context) error {
	if r.l1m != nil {
		return nil
	}
	if r.stack.Engine() != Postgres {
		return fmt.Errorf("list-1m seeds through PostgreSQL's COPY: run it with -db postgres")
	}
	cs, err := r.setup.Companies(ctx, "list-1m", 7000, 1, 0)
	if err != nil {
		return err
	}
	r.o.Log("list-1m: seeding %d conversations through SQL", r.o.ListRows)
	rep, err := SeedConversations(ctx, SeedOptions{DatabaseURL: r.stack.DatabaseURL, CompanyID: cs[0].ID,
		CompanyChannelID: cs[0].ChannelID, N: r.o.ListRows, Log: r.o.Log})
	if err != nil {
		return err
	}
	r.o.Log("list-1m: seeded in %.0f s", rep.Seconds)
	r.l1m = &list1M{company: cs[0], seeded: rep}
	return nil
}

// runList1M lists the seeded company's conversations each way with the
// closed loop's connections for the scenario's duration.
func (r *runner) runList1M(ctx context.Context, res *Result) error {
	if err := r.prepareList1M(ctx); err != nil {
		return err
	}
	co := r.l1m.company
	for _, c := range listingCases {
		lc := ListingCase{Name: c.name, Path: c.path}
		var page struct {
			Total int `json:"total"`
		}
		if err := r.api.JSON(ctx, "GET", c.path, co.Token, nil, &page); err != nil {
			return err
		}
		lc.Total = page.Total
		rec := NewRecorder()
		drove := Drive(ctx, Shape{Mode: Closed, Conns: r.o.Conns, Duration: r.o.Duration}, rec,
			func(ctx context.Context, _ int, _ time.Time) string {
				status, _, err := r.api.Do(ctx, "GET", c.path, co.Token, nil)
				return outcome(status, err)
			})
		lc.Latency, lc.Errors = rec.Latencies(), rec.Errors()
		lc.Throughput = float64(rec.Count()) / drove.Elapsed.Seconds()
		r.o.Log("list-1m %s: p50 %.1f p99 %.1f ms (total %d)", c.name, lc.Latency.P50, lc.Latency.P99, lc.Total)
		res.Listing = append(res.Listing, lc)
	}
	return nil
}
