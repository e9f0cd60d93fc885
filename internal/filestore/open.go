package filestore

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/chatmsg/gateway/internal/store"
)

// Settings of MEDIA_STORE.
const (
	// SettingLocal keeps files under DATA_DIR/media (the default with
	// SQLite).
	SettingLocal = "local"
	// SettingDatabase keeps files in the database (the default with
	// PostgreSQL).
	SettingDatabase = "database"
	// SchemeS3 starts an S3 setting: s3://bucket?endpoint=…&region=….
	SchemeS3 = "s3://"
)

// CheckSetting validates a MEDIA_STORE value without opening anything.
func CheckSetting(setting string) error {
	switch {
	case setting == SettingLocal, setting == SettingDatabase:
		return nil
	case strings.HasPrefix(setting, SchemeS3):
		_, err := ParseS3(setting)
		return err
	}
	return fmt.Errorf("%q is not %s, %s or s3://bucket?endpoint=host:port&region=name", redact(setting), SettingLocal, SettingDatabase)
}

// LocalDir is the directory of the local backend under a data directory;
// its layout (messages/…, templates/…) is the stores' key space, so
// `gateway admin media migrate` copies it key for key.
func LocalDir(dataDir string) string { return filepath.Join(dataDir, "media") }

// Open returns the store a MEDIA_STORE setting names: the local directory
// under dataDir, the database db, or an S3 bucket.
func Open(setting, dataDir string, db *store.DB) (Store, error) {
	if err := CheckSetting(setting); err != nil {
		return nil, err
	}
	switch {
	case setting == SettingLocal:
		if dataDir == "" {
			return nil, fmt.Errorf("the local media store needs DATA_DIR")
		}
		return OpenLocal(LocalDir(dataDir))
	case setting == SettingDatabase:
		if db == nil {
			return nil, fmt.Errorf("the database media store needs a database")
		}
		return NewDatabase(db), nil
	}
	cfg, err := ParseS3(setting)
	if err != nil {
		return nil, err
	}
	return OpenS3(cfg)
}
