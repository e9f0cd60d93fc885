package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/chatmsg/gateway/internal/app"
	"github.com/chatmsg/gateway/internal/filestore"
)

// mediaMigrateResult is what `admin media migrate` prints.
type mediaMigrateResult struct {
	From    string `json:"from"`
	Store   string `json:"store"`
	Copied  int    `json:"copied"`
	Skipped int    `json:"skipped"`
	Bytes   int64  `json:"bytes"`
}

func init() {
	// `gateway admin media migrate`: a deployment that kept its files in
	// DATA_DIR/media (the local store) moves them into the configured one
	// (the database, an S3 bucket) before its replicas multiply. Each file
	// keeps its key, so the rows that name it need no change; a file the
	// store already holds with the same size is skipped, so the command
	// can be run again after an interruption, or once more after the last
	// single-replica start.
	adminCommands["media migrate"] = adminCommand{func(fs *flag.FlagSet) adminAction {
		from := fs.String("from", "", "data directory whose media/ to copy (default DATA_DIR)")
		return func(ctx context.Context, a *app.App) (any, error) {
			dataDir := *from
			if dataDir == "" {
				dataDir = a.Config.DataDir
			}
			dir := filestore.LocalDir(dataDir)
			if l, ok := a.Files.(*filestore.Local); ok && l.Root() == dir {
				return nil, fmt.Errorf("MEDIA_STORE is this data directory's own media (%s): set MEDIA_STORE (database or s3://…) to the store to copy into", dir)
			}
			res, err := filestore.CopyDir(ctx, dir, a.Files, func(key string, copied bool) {
				if copied {
					fmt.Fprintln(os.Stderr, "copied", key)
				}
			})
			out := mediaMigrateResult{From: dir, Store: a.Files.Kind(), Copied: res.Copied, Skipped: res.Skipped, Bytes: res.Bytes}
			if err != nil {
				return nil, fmt.Errorf("media migrate stopped after %d files (run it again to go on): %w", res.Copied+res.Skipped, err)
			}
			return out, nil
		}
	}}
}
