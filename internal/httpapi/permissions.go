package httpapi

import (
	"github.com/getkin/kin-openapi/openapi3"

	"github.com/chatmsg/gateway/internal/auth"
	"github.com/chatmsg/gateway/internal/fault"
)

// permissionExtension names, on each secured operation of the document, the
// permission a token needs to call it.
const permissionExtension = "x-permission"

// requiredPermission returns the permission op names in x-permission, or ""
// when it names none.
func requiredPermission(op *openapi3.Operation) string {
	s, _ := op.Extensions[permissionExtension].(string)
	return s
}

// authorize is the one permission check of the API: the principal must hold
// the permission the operation names. A secured operation that names none is
// refused rather than let through, so a new operation without x-permission
// cannot widen what tokens reach (a test also refuses such a document).
func authorize(op *openapi3.Operation, p auth.Principal) error {
	perm := requiredPermission(op)
	if perm == "" {
		return fault.New(fault.Forbidden, "This action is unauthorized.")
	}
	return p.Require(perm)
}
