//go:build contract

package pactffi

/*
#cgo LDFLAGS: -lpact_ffi
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

// Declared here rather than including pact.h: pact-go vendors that header in
// an internal package we cannot reference, and this is the only call we need.
// Signature as in pact_ffi 0.4.28.
typedef uint32_t InteractionHandle;
bool pactffi_with_metadata(InteractionHandle interaction, const char *key, const char *value, int part);
*/
import "C"

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"unsafe"

	message "github.com/pact-foundation/pact-go/v2/message/v4"
)

// Interaction is the FFI's InteractionHandle (a uint32) of one interaction in
// a pact that pact-go is building.
type Interaction uint32

// partRequest is the FFI's InteractionPart_Request. For asynchronous messages
// the message itself is the "request" part.
const partRequest = 0

// InteractionOf returns the FFI handle of the message interaction that b
// builds.
//
// pact-go keeps the handle unexported (builder.messageHandle.handle, a
// *native.Message in an internal package). We read it with reflect, which
// allows reading unexported integer fields without unsafe and without
// modifying anything. The field names are those of pact-go v2.4.2 (pinned in
// go.mod); if an upgrade renames them this fails with an explicit error
// instead of silently writing metadata to a wrong interaction.
func InteractionOf(b *message.AsynchronousMessageBuilder) (Interaction, error) {
	if b == nil {
		return 0, errors.New("pactffi: nil AsynchronousMessageBuilder")
	}
	msg := reflect.ValueOf(b).Elem().FieldByName("messageHandle")
	if !msg.IsValid() || msg.Kind() != reflect.Pointer || msg.IsNil() {
		return 0, errors.New("pactffi: AsynchronousMessageBuilder has no messageHandle pointer; pact-go internals changed (written for v2.4.2)")
	}
	h := msg.Elem().FieldByName("handle")
	if !h.IsValid() || h.Kind() != reflect.Uint32 {
		return 0, errors.New("pactffi: native.Message has no uint32 handle; pact-go internals changed (written for v2.4.2)")
	}
	return Interaction(h.Uint()), nil
}

// WithMetadataMatcher sets metadata key on the message interaction to
// valueJSON, a JSON document in the FFI's integration format: a plain JSON
// value (exact match) or a matcher object as returned by Regex. The pact file
// then holds the example value plus a matching rule under
// matchingRules.metadata, which the provider verification applies.
//
// Call it before the builder's Verify: Verify writes the pact file, and later
// changes only reach memory (the FFI still returns true for them).
func WithMetadataMatcher(i Interaction, key, valueJSON string) error {
	if !json.Valid([]byte(valueJSON)) {
		return fmt.Errorf("pactffi: metadata %q: value is not valid JSON: %s", key, valueJSON)
	}
	cKey := C.CString(key)
	defer C.free(unsafe.Pointer(cKey))
	cValue := C.CString(valueJSON)
	defer C.free(unsafe.Pointer(cValue))
	if !C.pactffi_with_metadata(C.InteractionHandle(i), cKey, cValue, partRequest) {
		return fmt.Errorf("pactffi: pactffi_with_metadata(%d, %q) returned false (unknown handle, or not a message interaction)", uint32(i), key)
	}
	return nil
}

// Regex returns the matcher JSON for "value matches pattern", with example as
// the value stored in the pact (and handed to the consumer). Pact's regex
// matcher is unanchored, so pattern should carry ^ and $. The example is
// checked here (Go RE2; the patterns we use mean the same in Rust's regex) so
// an inconsistent contract fails at the consumer, not later at the provider.
func Regex(pattern, example string) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("pactffi: bad regex %q: %w", pattern, err)
	}
	if !re.MatchString(example) {
		return "", fmt.Errorf("pactffi: example %q does not match its own regex %q", example, pattern)
	}
	b, err := json.Marshal(map[string]string{
		"pact:matcher:type": "regex",
		"regex":             pattern,
		"value":             example,
	})
	return string(b), err
}
