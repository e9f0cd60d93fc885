package webhooks

import (
	"slices"
	"strconv"
	"strings"
)

// encodeIDs writes ids as ",1,5,9," (sorted, unique): one portable LIKE
// finds an id in it, and it needs no array type on SQLite.
func encodeIDs(ids []int64) string {
	ids = slices.Clone(ids)
	slices.Sort(ids)
	ids = slices.Compact(ids)
	var b strings.Builder
	b.WriteByte(',')
	for _, id := range ids {
		b.WriteString(strconv.FormatInt(id, 10))
		b.WriteByte(',')
	}
	return b.String()
}

// decodeIDs reads what encodeIDs wrote.
func decodeIDs(s string) []int64 {
	var out []int64
	for _, part := range strings.Split(strings.Trim(s, ","), ",") {
		if id, err := strconv.ParseInt(part, 10, 64); err == nil {
			out = append(out, id)
		}
	}
	return out
}
