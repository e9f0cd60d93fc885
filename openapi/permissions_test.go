package openapi_test

import (
	"slices"
	"testing"

	"github.com/chatmsg/gateway/internal/auth"
)

// TestEverySecuredOperationNamesItsPermission keeps the permission model in
// the document: each secured operation names one permission of the list in
// info.x-permissions and documents the 403 a token without it gets; public
// operations name none; and the list is exactly the one tokens are issued
// from (auth.AllPermissions), so `admin token create` accepts the
// document's names and nothing else.
func TestEverySecuredOperationNamesItsPermission(t *testing.T) {
	t.Parallel()
	doc := load(t)
	listed, ok := doc.Info.Extensions["x-permissions"].(map[string]any)
	if !ok {
		t.Fatalf("info.x-permissions is %T, want a map of permission to description", doc.Info.Extensions["x-permissions"])
	}
	var names []string
	for name := range listed {
		names = append(names, name)
	}
	slices.Sort(names)
	issued := slices.Sorted(slices.Values(auth.AllPermissions))
	if !slices.Equal(names, issued) {
		t.Errorf("info.x-permissions = %v, auth.AllPermissions = %v", names, issued)
	}
	used := map[string]bool{}
	for _, o := range operations(doc) {
		name := o.method + " " + o.path
		perm, has := o.op.Extensions["x-permission"]
		if !secured(doc, o.op) {
			if has {
				t.Errorf("%s: public operation names x-permission %v", name, perm)
			}
			continue
		}
		s, _ := perm.(string)
		if _, known := listed[s]; !known {
			t.Errorf("%s: x-permission %v is not one of info.x-permissions", name, perm)
		}
		used[s] = true
		if o.op.Responses.Value("403") == nil {
			t.Errorf("%s: secured but documents no 403", name)
		}
	}
	for name := range listed {
		if !used[name] {
			t.Errorf("permission %s guards no operation", name)
		}
	}
}
