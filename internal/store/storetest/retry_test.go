package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestRetryTooManyClients(t *testing.T) {
	t.Parallel()
	tooMany := fmt.Errorf("connect: %w", &pgconn.PgError{Code: "53300", Message: "sorry, too many clients already"})
	other := fmt.Errorf("connect: %w", &pgconn.PgError{Code: "28P01", Message: "password authentication failed"})
	cases := []struct {
		name      string
		errs      []error // what each attempt returns; nil = connected
		wantCalls int
		wantErr   error
	}{
		{"connects at once", []error{nil}, 1, nil},
		{"waits out a full server", []error{tooMany, tooMany, nil}, 3, nil},
		{"other errors are not retried", []error{other, nil}, 1, other},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := retryTooManyClients(context.Background(), func() error {
				calls++
				return tc.errs[calls-1]
			})
			if calls != tc.wantCalls || !errors.Is(err, tc.wantErr) {
				t.Fatalf("calls %d, err %v; want %d, %v", calls, err, tc.wantCalls, tc.wantErr)
			}
		})
	}
	t.Run("stops when the context ends", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := retryTooManyClients(ctx, func() error {
			calls++
			cancel()
			return tooMany
		})
		if calls != 1 || !errors.Is(err, context.Canceled) {
			t.Fatalf("calls %d, err %v", calls, err)
		}
	})
}
