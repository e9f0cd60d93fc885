package channels

import (
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/secrets"
)

// SecretColumns are the columns of this package that hold secrets at rest
// (the provider credentials), for `gateway admin secrets rotate`.
var SecretColumns = []secrets.Column{accessTokenColumn, appSecretColumn}

var (
	accessTokenColumn = secrets.Column{Table: "provider_accounts", Key: "id", Column: "access_token"}
	appSecretColumn   = secrets.Column{Table: "provider_accounts", Key: "id", Column: "app_secret"}
)

// UseSecrets makes the service seal provider credentials with k when it
// stores them and open them when it reads them (clear when k is nil).
func (s *Service) UseSecrets(k *secrets.Keyring) { s.keyring = k }

// sealAccount replaces the credentials of a row about to be stored with
// their sealed values.
func (s *Service) sealAccount(acc *accountRow) error {
	var err error
	if acc.AccessToken, err = s.keyring.Seal(accessTokenColumn.Purpose(), acc.AccessToken); err != nil {
		return fault.Internalf(err, "seal access token")
	}
	if acc.AppSecret, err = s.keyring.Seal(appSecretColumn.Purpose(), acc.AppSecret); err != nil {
		return fault.Internalf(err, "seal app secret")
	}
	return nil
}

// opened returns ch with its provider credentials opened for use.
func (s *Service) opened(ch Channel) (Channel, error) {
	a := ch.ProviderAccount
	if a == nil {
		return ch, nil
	}
	open := *a
	var err error
	if open.AccessToken, err = s.keyring.Open(accessTokenColumn.Purpose(), a.AccessToken); err != nil {
		return Channel{}, fault.Internalf(err, "open access token of provider account %d", a.ID)
	}
	if open.AppSecret, err = s.keyring.Open(appSecretColumn.Purpose(), a.AppSecret); err != nil {
		return Channel{}, fault.Internalf(err, "open app secret of provider account %d", a.ID)
	}
	ch.ProviderAccount = &open
	return ch, nil
}
