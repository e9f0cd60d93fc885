package secrets_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/store"
	"github.com/chatmsg/gateway/internal/store/storetest"
)

// key returns a ring entry "id:base64" whose 32 key bytes are all b.
func key(id string, b byte) string {
	return id + ":" + base64.StdEncoding.EncodeToString([]byte(strings.Repeat(string(rune(b)), 32)))
}

func ring(t *testing.T, spec string) *secrets.Keyring {
	t.Helper()
	k, err := secrets.Parse(spec)
	if err != nil {
		t.Fatalf("parse %q: %v", spec, err)
	}
	return k
}

func TestSealOpen(t *testing.T) {
	t.Parallel()
	const purpose = "webhook_subscriptions.secret"
	k1 := ring(t, key("k1", 'a'))
	sealed, err := k1.Seal(purpose, "whsec_plain")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sealed, "enc:v1:k1:") || strings.Contains(sealed, "whsec_plain") {
		t.Fatalf("sealed value %q", sealed)
	}
	if again, _ := k1.Seal(purpose, "whsec_plain"); again == sealed {
		t.Error("two seals of one value are equal: the nonce is not fresh")
	}

	cases := []struct {
		name    string
		ring    *secrets.Keyring
		purpose string
		stored  string
		want    string
		errHas  string
	}{
		{"round trip", k1, purpose, sealed, "whsec_plain", ""},
		{"older key still in the ring", ring(t, key("k2", 'b')+","+key("k1", 'a')), purpose, sealed, "whsec_plain", ""},
		{"clear value written before a key", k1, purpose, "whsec_legacy", "whsec_legacy", ""},
		{"no ring, clear value", nil, purpose, "whsec_legacy", "whsec_legacy", ""},
		{"no ring, sealed value", nil, purpose, sealed, "", `encrypted with key "k1" but SECRETS_KEY is not set`},
		{"key id missing from the ring", ring(t, key("k2", 'b')), purpose, sealed, "", `key "k1", which SECRETS_KEY does not contain`},
		{"same id, wrong key material", ring(t, key("k1", 'z')), purpose, sealed, "", `does not decrypt with key "k1"`},
		{"moved to another column", k1, "provider_accounts.app_secret", sealed, "", `does not decrypt with key "k1"`},
		{"altered", k1, purpose, sealed[:len(sealed)-2] + "AA", "", `does not decrypt`},
		{"truncated", k1, purpose, "enc:v1:k1:AAAA", "", "not a well-formed sealed value"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.ring.Open(tc.purpose, tc.stored)
			if tc.errHas == "" {
				if err != nil || got != tc.want {
					t.Errorf("%q %v, want %q", got, err, tc.want)
				}
				return
			}
			if !errors.Is(err, secrets.ErrUnreadable) || !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("err %v, want ErrUnreadable mentioning %q", err, tc.errHas)
			}
		})
	}

	var none *secrets.Keyring
	if v, err := none.Seal(purpose, "x"); err != nil || v != "x" {
		t.Errorf("no ring seals to %q %v, want the clear value", v, err)
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	short := "k:" + base64.StdEncoding.EncodeToString([]byte("16 bytes only!!!"))
	for _, tc := range []struct{ name, spec string }{
		{"no colon", "nocolon"},
		{"key not base64", "k1:not base64!"},
		{"key too short", short},
		{"key id twice", key("k1", 'a') + "," + key("k1", 'b')},
		{"key id with a space", key("bad id", 'a')},
		{"empty key id", ":" + key("", 'a')},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := secrets.Parse(tc.spec); err == nil {
				t.Errorf("Parse(%q) accepted it", tc.spec)
			} else if strings.Contains(err.Error(), "YWFh") {
				t.Errorf("the error shows key material: %v", err)
			}
		})
	}
	if k, err := secrets.Parse("  "); k != nil || err != nil {
		t.Errorf("empty spec: %v %v, want no ring", k, err)
	}
	if id := ring(t, key("new", 'b')+", "+key("old", 'a')).CurrentKeyID(); id != "new" {
		t.Errorf("current key %q, want the first", id)
	}
}

// TestRotate: values in clear and under an older key are re-sealed under
// the first key of the ring and still open to the same plain values; a
// second run has nothing to do; a value no key opens stops it unchanged.
func TestRotate(t *testing.T) {
	t.Parallel()
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		if _, err := db.Bun.ExecContext(ctx, "CREATE TABLE vault (id BIGINT PRIMARY KEY, secret TEXT NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		col := secrets.Column{Table: "vault", Key: "id", Column: "secret"}
		old := ring(t, key("old", 'a'))
		underOld, err := old.Seal(col.Purpose(), "two")
		if err != nil {
			t.Fatal(err)
		}
		current := ring(t, key("new", 'b')+","+key("old", 'a'))
		underNew, err := current.Seal(col.Purpose(), "three")
		if err != nil {
			t.Fatal(err)
		}
		stored := map[int64]string{1: "one", 2: underOld, 3: underNew}
		for id, v := range stored {
			if _, err := db.Bun.ExecContext(ctx, "INSERT INTO vault (id, secret) VALUES (?, ?)", id, v); err != nil {
				t.Fatal(err)
			}
		}
		read := func() map[int64]string {
			t.Helper()
			var rows []struct {
				ID     int64  `bun:"id"`
				Secret string `bun:"secret"`
			}
			if err := db.Bun.NewSelect().Table("vault").Column("id", "secret").Scan(ctx, &rows); err != nil {
				t.Fatal(err)
			}
			out := map[int64]string{}
			for _, r := range rows {
				out[r.ID] = r.Secret
			}
			return out
		}

		if _, err := secrets.Rotate(ctx, db, nil, []secrets.Column{col}); err == nil {
			t.Error("rotate without a key ring succeeded")
		}
		n, err := secrets.Rotate(ctx, db, current, []secrets.Column{col})
		if err != nil || n != 2 {
			t.Fatalf("rotate: %d %v, want the clear and the old-key value", n, err)
		}
		after := read()
		if after[3] != underNew {
			t.Error("a value already under the current key was rewritten")
		}
		newOnly := ring(t, key("new", 'b'))
		for id, want := range map[int64]string{1: "one", 2: "two", 3: "three"} {
			if !strings.HasPrefix(after[id], "enc:v1:new:") {
				t.Errorf("row %d: %q not sealed under the current key", id, after[id])
			}
			if got, err := newOnly.Open(col.Purpose(), after[id]); err != nil || got != want {
				t.Errorf("row %d opens to %q %v, want %q", id, got, err, want)
			}
		}
		if n, err := secrets.Rotate(ctx, db, current, []secrets.Column{col}); err != nil || n != 0 {
			t.Errorf("second rotate: %d %v, want nothing to do", n, err)
		}

		if _, err := db.Bun.ExecContext(ctx, "INSERT INTO vault (id, secret) VALUES (4, 'plain'), (5, ?)", underOld); err != nil {
			t.Fatal(err)
		}
		before := read()
		if _, err := secrets.Rotate(ctx, db, newOnly, []secrets.Column{col}); !errors.Is(err, secrets.ErrUnreadable) {
			t.Fatalf("rotate with a value no key opens: %v, want ErrUnreadable", err)
		}
		if got := read(); got[4] != before[4] || got[5] != before[5] {
			t.Error("a failed rotate changed values")
		}
	})
}
