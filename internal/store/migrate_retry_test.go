package store

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

type sqlStateError string

func (e sqlStateError) Error() string    { return "sql state " + string(e) }
func (e sqlStateError) SQLState() string { return string(e) }

func TestRetryMigration(t *testing.T) {
	for _, tc := range []struct {
		name      string
		fails     []error
		wantCalls int
		wantErr   bool
	}{
		{name: "deadlock victim then success", fails: []error{fmt.Errorf("migration 0076: %w", sqlStateError("40P01"))}, wantCalls: 2},
		{name: "serialization failure then success", fails: []error{sqlStateError("40001")}, wantCalls: 2},
		{name: "other error is not retried", fails: []error{sqlStateError("42P01")}, wantCalls: 1, wantErr: true},
		{name: "plain error is not retried", fails: []error{errors.New("boom")}, wantCalls: 1, wantErr: true},
		{name: "gives up after the bound", fails: []error{sqlStateError("40P01"), sqlStateError("40P01"), sqlStateError("40P01"),
			sqlStateError("40P01"), sqlStateError("40P01"), sqlStateError("40P01")}, wantCalls: migrateAttempts, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryMigration(context.Background(), func() error {
				calls++
				if calls <= len(tc.fails) {
					return tc.fails[calls-1]
				}
				return nil
			})
			if calls != tc.wantCalls || (err != nil) != tc.wantErr {
				t.Fatalf("calls %d err %v, want calls %d error %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
}
