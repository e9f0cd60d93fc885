package filestore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// S3Config is the S3-compatible backend's setting, parsed from
// MEDIA_STORE=s3://bucket?endpoint=host:port&region=…&secure=…&prefix=….
type S3Config struct {
	Bucket string
	// Endpoint is host[:port] of the service (default s3.amazonaws.com).
	Endpoint string
	Region   string
	// Secure selects HTTPS (default true; an http:// endpoint turns it off).
	Secure bool
	// Prefix is put before every key ("gateway/" keeps the gateway's files
	// apart in a shared bucket).
	Prefix string
	// PathStyle addresses the bucket in the path rather than the host name
	// (most self-hosted servers want it; default true for a custom
	// endpoint).
	PathStyle bool
	// AccessKey and SecretKey, when set by code (tests), replace the
	// credentials of the environment; a setting never carries them.
	AccessKey, SecretKey string
}

// ParseS3 reads an s3:// setting. Credentials are not part of it: they come
// from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
// AWS_SESSION_TOKEN, or MINIO_ROOT_USER and MINIO_ROOT_PASSWORD).
func ParseS3(spec string) (S3Config, error) {
	u, err := url.Parse(spec)
	if err != nil || u.Scheme != "s3" || u.Host == "" || (u.Path != "" && u.Path != "/") || u.User != nil {
		return S3Config{}, fmt.Errorf("%q is not s3://bucket?endpoint=host:port&region=name (credentials come from the environment)", redact(spec))
	}
	q := u.Query()
	c := S3Config{Bucket: u.Host, Endpoint: "s3.amazonaws.com", Region: q.Get("region"), Secure: true, Prefix: q.Get("prefix")}
	if e := q.Get("endpoint"); e != "" {
		c.PathStyle = true
		switch {
		case strings.HasPrefix(e, "http://"):
			c.Secure, e = false, strings.TrimPrefix(e, "http://")
		case strings.HasPrefix(e, "https://"):
			e = strings.TrimPrefix(e, "https://")
		}
		c.Endpoint = strings.TrimRight(e, "/")
	}
	for name, dst := range map[string]*bool{"secure": &c.Secure, "path_style": &c.PathStyle} {
		switch q.Get(name) {
		case "":
		case "true", "1":
			*dst = true
		case "false", "0":
			*dst = false
		default:
			return S3Config{}, fmt.Errorf("s3 setting %s=%q is not true or false", name, q.Get(name))
		}
	}
	if c.Prefix != "" {
		if err := CheckKey(strings.TrimSuffix(c.Prefix, "/")); err != nil {
			return S3Config{}, fmt.Errorf("s3 prefix %q: %w", c.Prefix, err)
		}
		c.Prefix = strings.TrimSuffix(c.Prefix, "/") + "/"
	}
	if strings.Contains(c.Endpoint, "/") {
		return S3Config{}, fmt.Errorf("s3 endpoint %q must be host[:port]", c.Endpoint)
	}
	return c, nil
}

func redact(spec string) string {
	if u, err := url.Parse(spec); err == nil && u.User != nil {
		u.User = url.User("REDACTED")
		return u.String()
	}
	return spec
}

// S3 keeps files in an S3-compatible bucket. Puts are single streamed
// PUTs (the largest file is 100 MB, far under S3's 5 GB for one PUT), so
// no part is buffered in memory; Gets stream the object's body.
type S3 struct {
	c      *minio.Client
	cfg    S3Config
	bucket string
}

var _ Store = (*S3)(nil)

// OpenS3 returns the store of cfg with credentials from the environment.
// It does not reach the service: a bucket that is down makes calls
// ErrUnavailable, it does not stop the gateway from starting.
func OpenS3(cfg S3Config) (*S3, error) {
	creds := credentials.NewChainCredentials([]credentials.Provider{&credentials.EnvAWS{}, &credentials.EnvMinio{}})
	if cfg.AccessKey != "" {
		creds = credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, "")
	}
	lookup := minio.BucketLookupDNS
	if cfg.PathStyle {
		lookup = minio.BucketLookupPath
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost:   32,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 30 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds: creds, Secure: cfg.Secure, Region: cfg.Region, BucketLookup: lookup, Transport: tr,
		// A store that is down answers 503 soon rather than after the
		// client's ten tries.
		MaxRetries: 2,
	})
	if err != nil {
		return nil, fmt.Errorf("s3 client: %w", err)
	}
	return &S3{c: c, cfg: cfg, bucket: cfg.Bucket}, nil
}

// Kind implements Store.
func (s *S3) Kind() string { return "s3" }

func (s *S3) object(key string) (string, error) {
	if err := CheckKey(key); err != nil {
		return "", err
	}
	return s.cfg.Prefix + key, nil
}

// Put implements Store.
func (s *S3) Put(ctx context.Context, key string, r io.Reader, size int64, contentType string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("%w: negative size", ErrSize)
	}
	if contentType == "" {
		contentType = "application/octet-stream"
	}
	src := newExactly(r, size)
	_, err = s.c.PutObject(ctx, s.bucket, name, src, size, minio.PutObjectOptions{ContentType: contentType, DisableMultipart: true})
	if err != nil {
		if src.err != nil && !errors.Is(src.err, io.EOF) {
			return src.err // the source's own failure (ErrSize, a client gone)
		}
		return s.classify("s3 put", err)
	}
	// A reader longer than announced: the PUT sent size bytes; the extra
	// byte check happens here.
	if _, err := src.Read(make([]byte, 1)); err != nil && !errors.Is(err, io.EOF) {
		_ = s.c.RemoveObject(context.WithoutCancel(ctx), s.bucket, name, minio.RemoveObjectOptions{})
		return err
	}
	return nil
}

// Get implements Store. The object's status is checked before the body is
// handed over, so a missing object is ErrNotFound here, not at the first
// Read.
func (s *S3) Get(ctx context.Context, key string) (*Object, error) {
	name, err := s.object(key)
	if err != nil {
		return nil, err
	}
	o, err := s.c.GetObject(ctx, s.bucket, name, minio.GetObjectOptions{})
	if err != nil {
		return nil, s.classify("s3 get", err)
	}
	st, err := o.Stat()
	if err != nil {
		_ = o.Close()
		return nil, s.classify("s3 get", err)
	}
	return &Object{ReadCloser: s3Body{o, s}, Info: Info{Size: st.Size}}, nil
}

// s3Body turns read failures into ErrUnavailable.
type s3Body struct {
	*minio.Object
	s *S3
}

func (b s3Body) Read(p []byte) (int, error) {
	n, err := b.Object.Read(p)
	if err != nil && !errors.Is(err, io.EOF) {
		err = b.s.classify("s3 read", err)
	}
	return n, err
}

// Stat implements Store.
func (s *S3) Stat(ctx context.Context, key string) (Info, error) {
	name, err := s.object(key)
	if err != nil {
		return Info{}, err
	}
	st, err := s.c.StatObject(ctx, s.bucket, name, minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s.classify("s3 stat", err)
	}
	return Info{Size: st.Size}, nil
}

// Copy implements Store: one server-side CopyObject (a single copy takes
// objects up to 5 GB; the largest file is 100 MB).
func (s *S3) Copy(ctx context.Context, from, to string) error {
	src, err := s.object(from)
	if err != nil {
		return err
	}
	dst, err := s.object(to)
	if err != nil {
		return err
	}
	_, err = s.c.CopyObject(ctx, minio.CopyDestOptions{Bucket: s.bucket, Object: dst}, minio.CopySrcOptions{Bucket: s.bucket, Object: src})
	if err != nil {
		return s.classify("s3 copy", err)
	}
	return nil
}

// Delete implements Store (S3 answers a missing key with success).
func (s *S3) Delete(ctx context.Context, key string) error {
	name, err := s.object(key)
	if err != nil {
		return err
	}
	if err := s.c.RemoveObject(ctx, s.bucket, name, minio.RemoveObjectOptions{}); err != nil {
		return s.classify("s3 delete", err)
	}
	return nil
}

// EnsureBucket makes the bucket when it does not exist (tests, and the
// admin migration into a new bucket).
func (s *S3) EnsureBucket(ctx context.Context) error {
	ok, err := s.c.BucketExists(ctx, s.bucket)
	if err != nil {
		return s.classify("s3 bucket", err)
	}
	if ok {
		return nil
	}
	if err := s.c.MakeBucket(ctx, s.bucket, minio.MakeBucketOptions{Region: s.cfg.Region}); err != nil {
		return s.classify("s3 make bucket", err)
	}
	return nil
}

// classify maps S3 answers by code: a missing key is ErrNotFound, the rest
// (network failures, 5xx, a missing bucket, refused credentials) is
// ErrUnavailable — the operator's to fix, the client's to retry.
func (s *S3) classify(op string, err error) error {
	if errors.Is(err, context.Canceled) {
		return err
	}
	resp := minio.ToErrorResponse(err)
	if resp.Code == minio.NoSuchKey || (resp.StatusCode == http.StatusNotFound && resp.Code != minio.NoSuchBucket) {
		return ErrNotFound
	}
	return unavailable(op, err)
}
