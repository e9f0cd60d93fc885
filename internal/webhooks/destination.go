package webhooks

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/chatmsg/gateway/internal/netguard"
	"github.com/chatmsg/gateway/internal/secrets"
)

// Destination kinds, by URL scheme (issue 27). A broker destination is only
// another transport behind the same lane: filters, retries, the log,
// redelivery and disabling do not know which one a subscription uses.
const (
	kindHTTP = "http"
	kindNATS = "nats"
	kindAMQP = "amqp"
)

// Validation texts of broker URLs (field "url"). An unknown scheme and a
// malformed http(s) URL keep the document's msgURLInvalid.
const (
	msgNATSSubject  = "Url must name a JetStream subject: nats://host:port/subject (no wildcards)"
	msgAMQPExchange = "Url must name an exchange: amqp://user:pass@host:port/vhost?exchange=name&routing_key=key"
	msgBrokerURL    = "Url must be a valid nats or amqp URL with a host and a valid port"
)

// maskedPassword replaces the credentials of a broker URL in every read.
const maskedPassword = "***"

// destinationColumn holds a broker URL with its credentials, sealed like the
// signing secret; url then holds the same URL with the credentials masked,
// which is what reads return and the list filter searches. Empty for URLs
// without credentials (url is the destination).
var destinationColumn = secrets.Column{Table: "webhook_subscriptions", Key: "id", Column: "destination"}

// destination is a parsed subscription URL.
type destination struct {
	kind string
	// server is what a broker connection dials (scheme, credentials, host,
	// port, and the AMQP virtual host): the pool's key with target.
	server string
	// subject (NATS) or exchange and routingKey (AMQP).
	subject, exchange, routingKey string
}

func kindOf(raw string) string {
	scheme, _, _ := strings.Cut(raw, "://")
	switch strings.ToLower(scheme) {
	case "nats":
		return kindNATS
	case "amqp", "amqps":
		return kindAMQP
	default:
		return kindHTTP
	}
}

// parseDestination parses a URL the subscription may hold; the error is the
// field message for url.
func parseDestination(raw string) (destination, string) {
	kind := kindOf(raw)
	if kind == kindHTTP {
		if netguard.ValidateURL(raw) != nil {
			return destination{}, msgURLInvalid
		}
		return destination{kind: kindHTTP}, ""
	}
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || strings.HasSuffix(u.Host, ":") || u.Opaque != "" {
		return destination{}, msgBrokerURL
	}
	if p := u.Port(); p != "" {
		var n int
		if _, err := fmt.Sscanf(p, "%d", &n); err != nil || n < 1 || n > 65535 {
			return destination{}, msgBrokerURL
		}
	}
	d := destination{kind: kind}
	switch kind {
	case kindNATS:
		subject := strings.TrimPrefix(u.Path, "/")
		if !validSubject(subject) {
			return destination{}, msgNATSSubject
		}
		d.subject = subject
		server := *u
		server.Path, server.RawPath, server.RawQuery, server.Fragment = "", "", "", ""
		d.server = server.String()
	case kindAMQP:
		q := u.Query()
		d.exchange, d.routingKey = q.Get("exchange"), q.Get("routing_key")
		if strings.TrimSpace(d.exchange) == "" {
			return destination{}, msgAMQPExchange
		}
		server := *u
		server.RawQuery, server.Fragment = "", ""
		d.server = server.String()
	}
	return d, ""
}

// validSubject: a publish subject is dot-separated non-empty tokens without
// wildcards or white space.
func validSubject(s string) bool {
	if s == "" || len(s) > 1024 {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" || tok == "*" || tok == ">" || strings.ContainsAny(tok, " \t\r\n*>") {
			return false
		}
	}
	return true
}

// maskURL returns raw with its credentials masked, and whether it had any:
// the user name stays (it tells the tenant which account), the password
// does not; a lone token (nats://token@host) is masked whole.
func maskURL(raw string) (string, bool) {
	if kindOf(raw) == kindHTTP {
		return raw, false
	}
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, false
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), maskedPassword)
	} else {
		u.User = url.User(maskedPassword)
	}
	return u.String(), true
}

// storedURL returns the url column and the sealed destination column of
// raw: credentials never reach the url column.
func (s *Service) storedURL(raw string) (shown, sealed string, err error) {
	shown, has := maskURL(raw)
	if !has {
		return raw, "", nil
	}
	sealed, err = s.keyring.Seal(destinationColumn.Purpose(), raw)
	return shown, sealed, err
}
