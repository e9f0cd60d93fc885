package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/fault"
	"github.com/chatmsg/gateway/internal/official"
	"github.com/chatmsg/gateway/internal/secrets"
	"github.com/chatmsg/gateway/internal/webhooks"
)

// adminAction runs a command against the wired app; runAdmin prints what
// it returns as JSON.
type adminAction func(ctx context.Context, a *app.App) (any, error)

// adminCommand is one `gateway admin …` command: flags declares its flags
// on fs and returns the action that reads them once they are parsed.
type adminCommand struct {
	flags func(fs *flag.FlagSet) adminAction
}

// companyIDFlag, permissionsFlag and expiresInFlag declare the flags
// several commands share, so they read the same everywhere.
func companyIDFlag(fs *flag.FlagSet) *int64 {
	return fs.Int64("company-id", 0, "company id (required)")
}

func permissionsFlag(fs *flag.FlagSet) *string {
	return fs.String("permissions", "all", `"all" or comma-separated permission names`)
}

func expiresInFlag(fs *flag.FlagSet) *time.Duration {
	return fs.Duration("expires-in", 0, "token lifetime (0 = no expiry)")
}

var adminCommands = map[string]adminCommand{
	"bootstrap": {func(fs *flag.FlagSet) adminAction {
		company := fs.String("company", "", "company name (required)")
		email := fs.String("email", "", "first user's email (required)")
		perms, ttl := permissionsFlag(fs), expiresInFlag(fs)
		force := fs.Bool("force", false, "create the company even when one with this name, or a user with this email, already exists")
		return func(ctx context.Context, a *app.App) (any, error) {
			p, err := auth.ParsePermissions(*perms)
			if err != nil {
				return nil, err
			}
			if !*force {
				if err := refuseDuplicateBootstrap(ctx, a.Auth, *company, *email); err != nil {
					return nil, err
				}
			}
			return a.Auth.Bootstrap(ctx, *company, *email, p, *ttl)
		}
	}},
	"company create": {func(fs *flag.FlagSet) adminAction {
		name := fs.String("name", "", "company name (required)")
		return func(ctx context.Context, a *app.App) (any, error) {
			id, err := a.Auth.CreateCompany(ctx, *name)
			return map[string]any{"company_id": id}, err
		}
	}},
	"user create": {func(fs *flag.FlagSet) adminAction {
		company := companyIDFlag(fs)
		email := fs.String("email", "", "email (required)")
		name := fs.String("name", "", "display name (default: the email's local part)")
		return func(ctx context.Context, a *app.App) (any, error) {
			id, err := a.Auth.CreateUser(ctx, *company, *name, *email)
			return map[string]any{"user_id": id}, err
		}
	}},
	"token create": {func(fs *flag.FlagSet) adminAction {
		user := fs.Int64("user-id", 0, "user id (required)")
		name := fs.String("name", "api", "token label")
		perms, ttl := permissionsFlag(fs), expiresInFlag(fs)
		return func(ctx context.Context, a *app.App) (any, error) {
			p, err := auth.ParsePermissions(*perms)
			if err != nil {
				return nil, err
			}
			raw, tok, err := a.Auth.CreateToken(ctx, *user, *name, p, *ttl)
			if err != nil {
				return nil, err
			}
			return map[string]any{"token_id": tok.ID, "token": raw, "expires_at": tok.ExpiresAt, "permissions": tok.Permissions}, nil
		}
	}},
	"secrets rotate": {func(fs *flag.FlagSet) adminAction {
		return func(ctx context.Context, a *app.App) (any, error) {
			n, err := secrets.Rotate(ctx, a.DB, a.Secrets, slices.Concat(webhooks.SecretColumns, channels.SecretColumns))
			return map[string]any{"resealed": n, "key_id": a.Secrets.CurrentKeyID()}, err
		}
	}},
	"token list": {func(fs *flag.FlagSet) adminAction {
		company := companyIDFlag(fs)
		return func(ctx context.Context, a *app.App) (any, error) {
			return a.Auth.ListTokens(ctx, *company)
		}
	}},
	"token revoke": {func(fs *flag.FlagSet) adminAction {
		id := fs.Int64("id", 0, "token id (required)")
		return func(ctx context.Context, a *app.App) (any, error) {
			return map[string]any{"revoked": *id}, a.Auth.RevokeToken(ctx, *id)
		}
	}},
	"channel register-official": {func(fs *flag.FlagSet) adminAction {
		var in channels.OfficialInput
		fs.Int64Var(&in.CompanyID, "company-id", 0, "company id (required)")
		fs.StringVar(&in.Name, "name", "", "channel name (required)")
		fs.StringVar(&in.Key, "key", "", "number with country code, digits only (required)")
		fs.StringVar(&in.BusinessAccountID, "business-account-id", "", "provider business account id (required)")
		fs.StringVar(&in.PhoneNumberID, "phone-number-id", "", "provider phone number id (required)")
		fs.StringVar(&in.AccessToken, "access-token", "", "provider access token (required)")
		fs.StringVar(&in.AppSecret, "app-secret", "", "provider app secret, verifies inbound webhook signatures (required)")
		fs.StringVar(&in.BaseURL, "base-url", "", "provider API base URL with its version (default: the provider's Graph API, "+
			official.GraphURL+"/<api-version>; e.g. http://127.0.0.1:9090/v23.0 for providersim)")
		version := fs.String("api-version", official.GraphVersion, "Graph API version of the default base URL")
		return func(ctx context.Context, a *app.App) (any, error) {
			if in.BaseURL == "" {
				in.BaseURL = official.GraphURL + "/" + *version
			}
			ch, err := a.Channels.RegisterOfficial(ctx, in)
			if err != nil {
				return nil, err
			}
			return map[string]any{"company_channel_id": ch.ID, "provider_account_id": ch.ProviderAccount.ID, "key": ch.Key,
				"base_url": ch.ProviderAccount.BaseURL}, nil
		}
	}},
	"company set-quota": {func(fs *flag.FlagSet) adminAction {
		company := companyIDFlag(fs)
		monthly := fs.Int64("monthly-messages", -1, "messages the company may send per calendar month (UTC); -1 = unlimited (the default)")
		return func(ctx context.Context, a *app.App) (any, error) {
			if *company <= 0 {
				return nil, fmt.Errorf("--company-id is required: %w", errUsage)
			}
			var limit *int64
			if *monthly >= 0 {
				limit = monthly
			}
			return a.Messaging.SetQuota(ctx, *company, limit)
		}
	}},
	"template sync": {func(fs *flag.FlagSet) adminAction {
		company := companyIDFlag(fs)
		account := fs.Int64("account-id", 0, "provider account id (required; provider_account.id in GET /api/company-channels)")
		return func(ctx context.Context, a *app.App) (any, error) {
			ch, err := a.Templates.AccountChannel(ctx, *company, *account)
			if err != nil {
				return nil, err
			}
			return a.Templates.Sync(ctx, ch)
		}
	}},
	"channel webhook-info": {func(fs *flag.FlagSet) adminAction {
		company := companyIDFlag(fs)
		account := fs.Int64("account-id", 0, "provider account id (required)")
		return func(ctx context.Context, a *app.App) (any, error) {
			ch, err := a.Templates.AccountChannel(ctx, *company, *account)
			if err != nil {
				return nil, err
			}
			return map[string]any{
				"callback_url": a.Config.PublicBaseURL + "/provider-webhooks/" + ch.ProviderAccount.PhoneNumberID,
				"verify_token": official.VerifyToken(ch.ProviderAccount),
			}, nil
		}
	}},
}

// refuseDuplicateBootstrap fails when a company with the name or a user with the email exists: a
// repeated bootstrap (a re-run walk-through, a retried script) would otherwise create a second
// company silently, and its ids would not be the ones the operator goes on to use.
func refuseDuplicateBootstrap(ctx context.Context, svc *auth.Service, company, email string) error {
	c, err := svc.FindBootstrapConflicts(ctx, company, email)
	if err != nil || !c.Any() {
		return err
	}
	var found []string
	if len(c.CompanyIDs) > 0 {
		found = append(found, fmt.Sprintf("a company named %q exists (company_id %s)", company, joinIDs(c.CompanyIDs)))
	}
	if len(c.UserCompanyIDs) > 0 {
		found = append(found, fmt.Sprintf("a user with email %s exists (company_id %s)", email, joinIDs(c.UserCompanyIDs)))
	}
	return fault.New(fault.Rule, "not bootstrapping: "+strings.Join(found, " and ")+
		`; use that company ("admin token create --user-id N" for a new token), or pass --force to create another company anyway`)
}

func joinIDs(ids []int64) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = strconv.FormatInt(id, 10)
	}
	return strings.Join(s, ", ")
}

func runAdmin(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	name, rest := adminName(args)
	cmd, ok := adminCommands[name]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown admin command %q: %w", name, errUsage)
	}
	var action adminAction
	cfg, err := parseConfig("admin "+name, rest, getenv, func(fs *flag.FlagSet) { action = cmd.flags(fs) })
	if err != nil {
		return err
	}
	// Admin commands never work jobs; they only share the wiring.
	a, err := app.New(ctx, cfg, app.Options{InsertOnlyJobs: true})
	if err != nil {
		return err
	}
	defer a.Close()
	res, err := action(ctx, a)
	if err != nil {
		return err
	}
	return printJSON(stdout, res)
}

// adminName splits "token create --flags" into the command name and flags.
func adminName(args []string) (string, []string) {
	if len(args) == 0 {
		return "", nil
	}
	if _, ok := adminCommands[args[0]]; ok {
		return args[0], args[1:]
	}
	if len(args) > 1 {
		return args[0] + " " + args[1], args[2:]
	}
	return args[0], nil
}
