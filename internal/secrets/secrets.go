// Package secrets keeps secrets at rest encrypted: webhook signing secrets
// and provider access tokens and app secrets are sealed with AES-256-GCM
// under a key ring from configuration (SECRETS_KEY) before they are stored,
// and opened when they are used. Each sealed value names the key that
// sealed it, so keys can be rotated: the first key of the ring seals, every
// key opens, and Rotate re-seals everything under the first.
//
// Without a key ring values are stored and read in clear, as before the
// ring existed; values stored in clear stay readable once a ring is set and
// are sealed by the next Rotate.
package secrets

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/uptrace/bun"

	"github.com/chatmsg/gateway/internal/store"
)

// sealedPrefix marks a sealed value: "enc:v1:<key id>:<base64(nonce|ciphertext)>".
const sealedPrefix = "enc:v1:"

var keyID = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Keyring holds the keys. A nil *Keyring is valid and means "no key":
// Seal stores clear text and Open reads clear text.
type Keyring struct {
	current string
	aeads   map[string]cipher.AEAD
}

// Parse reads a key ring "id1:base64key,id2:base64key" (standard base64 of
// 32 bytes each); the first key seals. An empty spec is no ring (nil).
func Parse(spec string) (*Keyring, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return nil, nil
	}
	k := &Keyring{aeads: map[string]cipher.AEAD{}}
	for i, entry := range strings.Split(spec, ",") {
		id, b64, ok := strings.Cut(strings.TrimSpace(entry), ":")
		if !ok || !keyID.MatchString(id) {
			return nil, fmt.Errorf("SECRETS_KEY entry %d: want id:base64key with an id of letters, digits, - or _", i+1)
		}
		if _, dup := k.aeads[id]; dup {
			return nil, fmt.Errorf("SECRETS_KEY: key id %q appears twice", id)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil || len(raw) != 32 {
			return nil, fmt.Errorf("SECRETS_KEY key %q: want 32 bytes in standard base64 (e.g. openssl rand -base64 32)", id)
		}
		block, err := aes.NewCipher(raw)
		if err != nil {
			return nil, fmt.Errorf("SECRETS_KEY key %q: %w", id, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("SECRETS_KEY key %q: %w", id, err)
		}
		k.aeads[id] = aead
		if i == 0 {
			k.current = id
		}
	}
	return k, nil
}

// CurrentKeyID is the id of the key that seals ("" without a ring).
func (k *Keyring) CurrentKeyID() string {
	if k == nil {
		return ""
	}
	return k.current
}

// Seal returns the value to store for plain. purpose names where it is
// stored (e.g. "webhook_subscriptions.secret") and is authenticated with
// it, so a sealed value copied into another column does not open there.
func (k *Keyring) Seal(purpose, plain string) (string, error) {
	if k == nil {
		return plain, nil
	}
	aead := k.aeads[k.current]
	nonce := make([]byte, aead.NonceSize(), aead.NonceSize()+len(plain)+aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("seal %s: %w", purpose, err)
	}
	sealed := aead.Seal(nonce, nonce, []byte(plain), []byte(purpose))
	return sealedPrefix + k.current + ":" + base64.RawStdEncoding.EncodeToString(sealed), nil
}

// ErrUnreadable is wrapped by every Open failure: the value is sealed with a
// key the ring lacks, or does not open with the key it names.
var ErrUnreadable = errors.New("secret cannot be decrypted")

// Open returns the plain value of a stored one. A value that is not sealed
// was stored before a key was configured and is returned as it is.
func (k *Keyring) Open(purpose, stored string) (string, error) {
	id, payload, sealed := parseSealed(stored)
	if !sealed {
		return stored, nil
	}
	if k == nil {
		return "", fmt.Errorf("%w: %s is encrypted with key %q but SECRETS_KEY is not set", ErrUnreadable, purpose, id)
	}
	aead, ok := k.aeads[id]
	if !ok {
		return "", fmt.Errorf("%w: %s is encrypted with key %q, which SECRETS_KEY does not contain", ErrUnreadable, purpose, id)
	}
	raw, err := base64.RawStdEncoding.DecodeString(payload)
	if err != nil || len(raw) < aead.NonceSize() {
		return "", fmt.Errorf("%w: %s is not a well-formed sealed value", ErrUnreadable, purpose)
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(purpose))
	if err != nil {
		return "", fmt.Errorf("%w: %s does not decrypt with key %q (wrong key material, or the value was altered)", ErrUnreadable, purpose, id)
	}
	return string(plain), nil
}

// sealedWithCurrent reports whether stored needs no rotation.
func (k *Keyring) sealedWithCurrent(stored string) bool {
	id, _, sealed := parseSealed(stored)
	return sealed && id == k.CurrentKeyID()
}

func parseSealed(stored string) (id, payload string, sealed bool) {
	rest, ok := strings.CutPrefix(stored, sealedPrefix)
	if !ok {
		return "", "", false
	}
	id, payload, ok = strings.Cut(rest, ":")
	return id, payload, ok
}

// Column is a text column that holds secrets, declared by the capability
// that owns its table so Rotate can re-seal it.
type Column struct {
	Table  string
	Key    string // primary key column
	Column string
}

// Purpose is the purpose values of the column are sealed for.
func (c Column) Purpose() string { return c.Table + "." + c.Column }

// Rotate re-seals under the ring's first key every value of cols that is
// clear or sealed with another key, in one transaction, and returns how many
// it re-sealed. A value that does not open stops it with nothing changed.
func Rotate(ctx context.Context, db *store.DB, k *Keyring, cols []Column) (int, error) {
	if k == nil {
		return 0, errors.New("SECRETS_KEY is not set: there is no key to encrypt with")
	}
	n := 0
	err := db.InTx(ctx, func(ctx context.Context, tx *store.Tx) error {
		for _, c := range cols {
			var rows []struct {
				ID    int64  `bun:"id"`
				Value string `bun:"value"`
			}
			if err := tx.NewSelect().Table(c.Table).ColumnExpr("? AS id, ? AS value", bun.Ident(c.Key), bun.Ident(c.Column)).
				Scan(ctx, &rows); err != nil {
				return fmt.Errorf("read %s: %w", c.Purpose(), err)
			}
			for _, r := range rows {
				if k.sealedWithCurrent(r.Value) {
					continue
				}
				plain, err := k.Open(c.Purpose(), r.Value)
				if err != nil {
					return fmt.Errorf("%s %d: %w", c.Table, r.ID, err)
				}
				sealed, err := k.Seal(c.Purpose(), plain)
				if err != nil {
					return err
				}
				if _, err := tx.NewUpdate().Table(c.Table).Set("? = ?", bun.Ident(c.Column), sealed).
					Where("? = ?", bun.Ident(c.Key), r.ID).Exec(ctx); err != nil {
					return fmt.Errorf("re-seal %s %d: %w", c.Purpose(), r.ID, err)
				}
				n++
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}
