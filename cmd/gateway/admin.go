package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/channels"
	"github.com/chatmsg/gateway/internal/config"
	"github.com/chatmsg/gateway/internal/official"
)

// adminCommand is one `gateway admin …` command: its flags and its action.
type adminCommand struct {
	flags func(fs *flag.FlagSet) func(ctx context.Context, a *app.App, out io.Writer) error
}

var adminCommands = map[string]adminCommand{
	"bootstrap": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		company := fs.String("company", "", "company name (required)")
		email := fs.String("email", "", "first user's email (required)")
		perms := fs.String("permissions", "all", `"all" or comma-separated permission names`)
		ttl := fs.Duration("expires-in", 0, "token lifetime (0 = no expiry)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			p, err := auth.ParsePermissions(*perms)
			if err != nil {
				return err
			}
			res, err := a.Auth.Bootstrap(ctx, *company, *email, p, *ttl)
			if err != nil {
				return err
			}
			return printJSON(out, res)
		}
	}},
	"company create": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		name := fs.String("name", "", "company name (required)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			id, err := a.Auth.CreateCompany(ctx, *name)
			if err != nil {
				return err
			}
			return printJSON(out, map[string]any{"company_id": id})
		}
	}},
	"user create": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		company := fs.Int64("company-id", 0, "company id (required)")
		email := fs.String("email", "", "email (required)")
		name := fs.String("name", "", "display name (default: the email's local part)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			id, err := a.Auth.CreateUser(ctx, *company, *name, *email)
			if err != nil {
				return err
			}
			return printJSON(out, map[string]any{"user_id": id})
		}
	}},
	"token create": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		user := fs.Int64("user-id", 0, "user id (required)")
		name := fs.String("name", "api", "token label")
		perms := fs.String("permissions", "all", `"all" or comma-separated permission names`)
		ttl := fs.Duration("expires-in", 0, "token lifetime (0 = no expiry)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			p, err := auth.ParsePermissions(*perms)
			if err != nil {
				return err
			}
			raw, tok, err := a.Auth.CreateToken(ctx, *user, *name, p, *ttl)
			if err != nil {
				return err
			}
			return printJSON(out, map[string]any{"token_id": tok.ID, "token": raw, "expires_at": tok.ExpiresAt, "permissions": tok.Permissions})
		}
	}},
	"token list": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		company := fs.Int64("company-id", 0, "company id (required)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			toks, err := a.Auth.ListTokens(ctx, *company)
			if err != nil {
				return err
			}
			return printJSON(out, toks)
		}
	}},
	"token revoke": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		id := fs.Int64("id", 0, "token id (required)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			if err := a.Auth.RevokeToken(ctx, *id); err != nil {
				return err
			}
			return printJSON(out, map[string]any{"revoked": *id})
		}
	}},
	"channel register-official": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		var in channels.OfficialInput
		fs.Int64Var(&in.CompanyID, "company-id", 0, "company id (required)")
		fs.StringVar(&in.Name, "name", "", "channel name (required)")
		fs.StringVar(&in.Key, "key", "", "number with country code, digits only (required)")
		fs.StringVar(&in.BusinessAccountID, "business-account-id", "", "provider business account id (required)")
		fs.StringVar(&in.PhoneNumberID, "phone-number-id", "", "provider phone number id (required)")
		fs.StringVar(&in.AccessToken, "access-token", "", "provider access token (required)")
		fs.StringVar(&in.AppSecret, "app-secret", "", "provider app secret, verifies inbound webhook signatures (required)")
		fs.StringVar(&in.BaseURL, "base-url", "", "provider API base URL, e.g. http://127.0.0.1:9090 for providersim (required)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			ch, err := a.Channels.RegisterOfficial(ctx, in)
			if err != nil {
				return err
			}
			return printJSON(out, map[string]any{"company_channel_id": ch.ID, "provider_account_id": ch.ProviderAccount.ID, "key": ch.Key})
		}
	}},
	"company set-quota": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		company := fs.Int64("company-id", 0, "company id (required)")
		monthly := fs.Int64("monthly-messages", -1, "messages the company may send per calendar month (UTC); -1 = unlimited (the default)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			if *company <= 0 {
				return fmt.Errorf("--company-id is required: %w", errUsage)
			}
			var limit *int64
			if *monthly >= 0 {
				limit = monthly
			}
			q, err := a.Messaging.SetQuota(ctx, *company, limit)
			if err != nil {
				return err
			}
			return printJSON(out, q)
		}
	}},
	"template sync": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		company := fs.Int64("company-id", 0, "company id (required)")
		account := fs.Int64("account-id", 0, "provider account id (required; provider_account.id in GET /api/company-channels)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			ch, err := a.Templates.AccountChannel(ctx, *company, *account)
			if err != nil {
				return err
			}
			res, err := a.Templates.Sync(ctx, ch)
			if err != nil {
				return err
			}
			return printJSON(out, res)
		}
	}},
	"channel webhook-info": {func(fs *flag.FlagSet) func(context.Context, *app.App, io.Writer) error {
		company := fs.Int64("company-id", 0, "company id (required)")
		account := fs.Int64("account-id", 0, "provider account id (required)")
		return func(ctx context.Context, a *app.App, out io.Writer) error {
			ch, err := a.Templates.AccountChannel(ctx, *company, *account)
			if err != nil {
				return err
			}
			return printJSON(out, map[string]any{
				"callback_url": a.Config.PublicBaseURL + "/provider-webhooks/" + ch.ProviderAccount.PhoneNumberID,
				"verify_token": official.VerifyToken(ch.ProviderAccount),
			})
		}
	}},
}

func runAdmin(ctx context.Context, args []string, stdout io.Writer, getenv func(string) string) error {
	name, rest := adminName(args)
	cmd, ok := adminCommands[name]
	if !ok {
		fmt.Fprint(os.Stderr, usage)
		return fmt.Errorf("unknown admin command %q: %w", name, errUsage)
	}
	fs := flag.NewFlagSet("admin "+name, flag.ContinueOnError)
	finish := config.Bind(fs, getenv)
	action := cmd.flags(fs)
	if err := fs.Parse(rest); err != nil {
		return err
	}
	cfg, err := finish()
	if err != nil {
		return err
	}
	// Admin commands never work jobs; they only share the wiring.
	a, err := app.New(ctx, cfg, app.Options{InsertOnlyJobs: true})
	if err != nil {
		return err
	}
	defer a.Close()
	return action(ctx, a, stdout)
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
