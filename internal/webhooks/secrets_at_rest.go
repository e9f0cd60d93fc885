package webhooks

import (
	"github.com/chatmsg/gateway/internal/secrets"
)

// SecretColumns are the columns of this package that hold secrets at rest,
// for `gateway admin secrets rotate`.
var SecretColumns = []secrets.Column{secretColumn, destinationColumn}

var secretColumn = secrets.Column{Table: "webhook_subscriptions", Key: "id", Column: "secret"}

// newSealedSecret returns a new signing secret and the value to store for
// it (sealed when a key ring is configured).
func (s *Service) newSealedSecret() (plain, stored string, err error) {
	if plain, err = newSecret(); err != nil {
		return "", "", err
	}
	if stored, err = s.keyring.Seal(secretColumn.Purpose(), plain); err != nil {
		return "", "", err
	}
	return plain, stored, nil
}

// signingSecret opens a subscription's stored secret for signing.
func (s *Service) signingSecret(stored string) (string, error) {
	return s.keyring.Open(secretColumn.Purpose(), stored)
}
