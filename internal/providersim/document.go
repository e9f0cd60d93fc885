package providersim

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"mime/multipart"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
	"gopkg.in/yaml.v3"
)

// The provider's own OpenAPI document (Graph API v23.0, MIT, license in
// testdata/ beside it). It is OpenAPI 3.1, which kin-openapi does not load
// (it reads 3.0), so its schemas are compiled as JSON Schema 2020-12 — the
// dialect of OpenAPI 3.1 — with santhosh-tekuri/jsonschema.
//
//go:embed testdata/meta-business-messaging-api_v23.0.yaml
var documentYAML []byte

const documentURL = "https://provider.invalid/meta-business-messaging-api_v23.0.json"

// Operations of the document the simulator serves, by operationId, and the
// webhook it POSTs.
const (
	OpSendMessage     = "sendMessage"
	OpUploadMedia     = "uploadImage"
	OpRetrieveMedia   = "retrieveMediaUrl"
	OpListTemplates   = "getTemplateByNameDefaultFields"
	OpWebhook         = "webhook"
	sendMessagePath   = "/{Version}/{Phone-Number-ID}/messages"
	uploadMediaPath   = "/{Version}/{Phone-Number-ID}/media"
	retrieveMediaPath = "/{Version}/{Media-ID}"
	listTemplatesPath = "/{Version}/{WABA-ID}/message_templates"
	webhookPath       = "/whatsapp/webhooks"
)

// Relaxation is one place where the simulator departs from the letter of
// the provider's document, because the document contradicts itself (its own
// examples fail it) or the platform: every departure is listed in
// Relaxations, with its reason.
type Relaxation struct {
	Where string
	Why   string
	apply func(doc map[string]any) error
}

// Relaxations are all the departures from the provider's document. Nothing
// else is relaxed: a request the document refuses, the simulator refuses.
var Relaxations = []Relaxation{
	{
		Where: "every schema whose allOf member says additionalProperties: false (TextMessage, ImageMessage, LocationMessage, …)",
		Why: "in JSON Schema an additionalProperties inside one allOf member cannot see the properties its sibling " +
			"(BaseMessageProperties) declares, so every send with messaging_product or to would fail; the intent — no " +
			"unknown property — is kept by moving it to unevaluatedProperties: false on the composed schema",
		apply: closeComposedSchemas,
	},
	{
		Where: "BaseMessageProperties.biz_opaque_callback_data",
		Why: "the platform accepts it on every send and echoes it in status webhooks (max 512 characters), " +
			"but the document omits it",
		apply: addCallbackData,
	},
	{
		Where: "LocationMessage.location.latitude / longitude",
		Why:   "typed as strings while the document's own examples (and the platform) use numbers: both are accepted",
		apply: numericCoordinates,
	},
	{
		Where: "TemplateComponent.index / ButtonComponent.index",
		Why: "typed as a string with the malformed pattern ^[2-6, 11-14]$ (a character class, refusing \"0\") while " +
			"the examples send the integer 0: a button position is accepted as a non-negative integer or a string of digits",
		apply: buttonIndex,
	},
	{
		Where: "BaseMessageProperties.required recipient_type and type; LanguageObject.required policy",
		Why: "the platform defaults recipient_type to individual, type to text and needs no language policy; the " +
			"document's own examples omit all three",
		apply: platformDefaults,
	},
	{
		Where: "ButtonComponent.sub_type / TemplateComponent.sub_type, ButtonParameterObject.type",
		Why: "the examples send CATALOG and flow, which the lower-case enum [quick_reply, url, catalog] lacks, and " +
			"their catalog and flow buttons take an action parameter the enum [payload, text] lacks: both cases, flow, " +
			"copy_code and action are accepted",
		apply: buttonSubTypes,
	},
	{
		Where: "InteractiveObject.type, ActionObject.oneOf",
		Why: "the order_details and order_status examples use the interactive types order_details and order_status and " +
			"the actions review_and_pay and review_order, which the document does not describe: they are added",
		apply: orderActions,
	},
	{
		Where: "a send body with status: read (mark as read, typing indicator)",
		Why:   "the document posts it to the messages operation in its examples but describes it with no schema: it is accepted as {messaging_product, status: read, message_id, typing_indicator?}",
		apply: markAsRead,
	},
	{
		Where: "webhook Change.field, Groups.timestamp, GroupParticipant.input / wa_id, PhoneObject.type, location.url, ErrorObject.type (PhoneObject and location are shared with the send side)",
		Why: "the document's webhook examples send group_participants_update, string timestamps, numeric participants, " +
			"phone type MOBILE, a location url and errors without type, which its schemas refuse: the webhook accepts what the examples send",
		apply: webhookExamples,
	},
	{
		Where: "WebhookPayload: messages[] of IncomingMessageValueGeneral and IncomingMessageValueSystem",
		Why: "the document reuses the send schemas (BaseMessageProperties requires messaging_product, recipient_type and to) " +
			"for what a contact sent, which carries from, id and timestamp instead: inbound messages are checked against " +
			"copies of those schemas whose base is InboundMessageProperties (from, id, timestamp, type, context); an inbound " +
			"sticker is {id, mime_type, sha256, animated} like other inbound media, not the send side's closed {id} | {link}",
		apply: inboundBase,
	},
}

// Strengthenings apply what the document means but JSON Schema does not
// enforce by itself.
var strengthenings = []Relaxation{
	{
		Where: "TemplateComponent, ParameterObject (discriminator without oneOf)",
		Why: "a discriminator is only a hint in OpenAPI 3.1; without it a button component would never be checked " +
			"against ButtonComponent: each mapped schema applies when its type is given. Not for ButtonParameterObject, " +
			"whose examples send action parameters and boolean texts its mapped schemas do not describe",
		apply: applyDiscriminators,
	},
}

// Document validates values against the provider's document.
type Document struct {
	requests  map[string]*jsonschema.Schema
	responses map[string]*jsonschema.Schema
	messages  map[string]*jsonschema.Schema // send schema per message type, for readable refusals
	// authorization is the Authorization header parameter's schema.
	authorization *jsonschema.Schema
	raw           map[string]any
}

var (
	loadOnce sync.Once
	loaded   *Document
	loadErr  error
)

// LoadDocument parses and compiles the embedded document once per process.
func LoadDocument() (*Document, error) {
	loadOnce.Do(func() { loaded, loadErr = compileDocument(Relaxations) })
	return loaded, loadErr
}

// MustLoadDocument is LoadDocument for callers that cannot go on without it
// (the embedded document either compiles or the build is broken).
func MustLoadDocument() *Document {
	d, err := LoadDocument()
	if err != nil {
		panic(err)
	}
	return d
}

// compileDocument parses the embedded document and compiles it with the
// given relaxations (all of them, except in the test that proves each one
// is needed).
func compileDocument(relaxations []Relaxation) (*Document, error) {
	j, err := documentJSON()
	if err != nil {
		return nil, err
	}
	tree, err := jsonschema.UnmarshalJSON(bytes.NewReader(j))
	if err != nil {
		return nil, err
	}
	doc, ok := tree.(map[string]any)
	if !ok {
		return nil, errors.New("provider document is not an object")
	}
	for _, r := range relaxations {
		if err := r.apply(doc); err != nil {
			return nil, fmt.Errorf("relaxation %q: %w", r.Where, err)
		}
	}
	for _, r := range strengthenings {
		if err := r.apply(doc); err != nil {
			return nil, fmt.Errorf("%s: %w", r.Where, err)
		}
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	if err := c.AddResource(documentURL, doc); err != nil {
		return nil, err
	}
	compile := func(ptr string) (*jsonschema.Schema, error) { return c.Compile(documentURL + "#" + ptr) }
	d := &Document{requests: map[string]*jsonschema.Schema{}, responses: map[string]*jsonschema.Schema{},
		messages: map[string]*jsonschema.Schema{}, raw: doc}
	body := func(path, method, contentType string) string {
		return "/paths/" + escape(path) + "/" + method + "/requestBody/content/" + escape(contentType) + "/schema"
	}
	answer := func(path, method string) string {
		return "/paths/" + escape(path) + "/" + method + "/responses/200/content/application~1json/schema"
	}
	for op, ptr := range map[string]string{
		OpSendMessage: body(sendMessagePath, "post", "application/json"),
		OpUploadMedia: body(uploadMediaPath, "post", "multipart/form-data"),
		OpWebhook:     body(webhookPath, "post", "application/json"),
	} {
		if d.requests[op], err = compile(ptr); err != nil {
			return nil, err
		}
	}
	for op, ptr := range map[string]string{
		OpSendMessage:   answer(sendMessagePath, "post"),
		OpUploadMedia:   answer(uploadMediaPath, "post"),
		OpRetrieveMedia: answer(retrieveMediaPath, "get"),
		OpListTemplates: answer(listTemplatesPath, "get"),
	} {
		if d.responses[op], err = compile(ptr); err != nil {
			return nil, err
		}
	}
	if d.authorization, err = compile("/components/parameters/Authorization/schema"); err != nil {
		return nil, err
	}
	mapping, _ := dig(doc, "components", "schemas", "Message", "discriminator", "mapping").(map[string]any)
	for typ, ref := range mapping {
		s, _ := ref.(string)
		if d.messages[typ], err = compile(strings.TrimPrefix(s, "#")); err != nil {
			return nil, err
		}
	}
	return d, nil
}

var documentJSON = sync.OnceValues(func() ([]byte, error) {
	var y any
	if err := yaml.Unmarshal(documentYAML, &y); err != nil {
		return nil, fmt.Errorf("parse provider document: %w", err)
	}
	// Through JSON so the tree has JSON's types (numbers as json.Number),
	// which is what the schema compiler reads.
	j, err := json.Marshal(stringKeys(y))
	if err != nil {
		return nil, fmt.Errorf("provider document to JSON: %w", err)
	}
	return j, nil
})

// escape is a JSON pointer token.
func escape(s string) string { return strings.NewReplacer("~", "~0", "/", "~1").Replace(s) }

func dig(v any, path ...string) any {
	for _, p := range path {
		switch t := v.(type) {
		case map[string]any:
			v = t[p]
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(t) {
				return nil
			}
			v = t[i]
		default:
			return nil
		}
	}
	return v
}

// ValidateRequest checks a request body (JSON, or the fields of a form)
// of op against the document. The error is a short, client-safe summary.
func (d *Document) ValidateRequest(op string, body []byte) error {
	s := d.requests[op]
	if s == nil {
		return fmt.Errorf("no request schema for %s", op)
	}
	return d.validate(s, body, op == OpSendMessage)
}

// ValidateUploadForm checks a media upload: the document describes the
// form as an object of string fields (file: binary), so its fields are
// checked as such, and the platform needs messaging_product and a file.
func (d *Document) ValidateUploadForm(form *multipart.Form) error {
	fields := map[string]any{}
	for k, v := range form.Value {
		fields[k] = strings.Join(v, ",")
	}
	for k := range form.File {
		fields[k] = "(binary)"
	}
	b, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	return d.ValidateRequest(OpUploadMedia, b)
}

// ValidateAuthorization checks an Authorization header against the
// document's Authorization parameter (required, "Bearer <token>").
func (d *Document) ValidateAuthorization(h string) error {
	if h == "" {
		return errors.New("the header is required")
	}
	b, _ := json.Marshal(h)
	return d.validate(d.authorization, b, false)
}

// ValidateResponse checks a 200 answer of op against the document.
func (d *Document) ValidateResponse(op string, body []byte) error {
	s := d.responses[op]
	if s == nil {
		return fmt.Errorf("no response schema for %s", op)
	}
	return d.validate(s, body, false)
}

func (d *Document) validate(s *jsonschema.Schema, body []byte, isSend bool) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
	if err != nil {
		return errors.New("the body is not valid JSON")
	}
	err = s.Validate(v)
	if err == nil {
		return nil
	}
	// Message is a oneOf of eleven schemas, whose failure only says that
	// none matched: the schema of the message's own type says why.
	if isSend {
		if typ, ok := dig(v, "type").(string); ok {
			if ms := d.messages[typ]; ms != nil {
				if err2 := ms.Validate(v); err2 != nil {
					err = err2
				}
			} else {
				return fmt.Errorf("type: %q is not a message type of the API", typ)
			}
		}
	}
	return summarize(err)
}

var english = message.NewPrinter(language.English)

// summarize reduces a validation error to its deepest problems, bounded:
// the refusal's details, never a dump of the schema or of the value.
func summarize(err error) error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return err
	}
	var leaves []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			leaves = append(leaves, loc+": "+e.ErrorKind.LocalizedString(english))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	sort.Strings(leaves)
	msg := strings.Join(leaves, "; ")
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	return errors.New(msg)
}

// ------------------------------------------------------------ relaxations

func schemas(doc map[string]any) (map[string]any, error) {
	s, ok := dig(doc, "components", "schemas").(map[string]any)
	if !ok {
		return nil, errors.New("no components/schemas")
	}
	return s, nil
}

func schema(doc map[string]any, name string) (map[string]any, error) {
	all, err := schemas(doc)
	if err != nil {
		return nil, err
	}
	s, ok := all[name].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("no schema %s", name)
	}
	return s, nil
}

// walk visits every object of the tree, children first.
func walk(v any, f func(map[string]any)) {
	switch t := v.(type) {
	case map[string]any:
		for _, c := range t {
			walk(c, f)
		}
		f(t)
	case []any:
		for _, c := range t {
			walk(c, f)
		}
	}
}

func closeComposedSchemas(doc map[string]any) error {
	all, err := schemas(doc)
	if err != nil {
		return err
	}
	n := 0
	walk(all, func(s map[string]any) {
		members, ok := s["allOf"].([]any)
		if !ok {
			return
		}
		for _, m := range members {
			if mm, ok := m.(map[string]any); ok && mm["additionalProperties"] == false {
				delete(mm, "additionalProperties")
				s["unevaluatedProperties"] = false
				n++
			}
		}
	})
	if n == 0 {
		return errors.New("no allOf member with additionalProperties: false (the document changed?)")
	}
	return nil
}

func addCallbackData(doc map[string]any) error {
	base, err := schema(doc, "BaseMessageProperties")
	if err != nil {
		return err
	}
	props, ok := base["properties"].(map[string]any)
	if !ok {
		return errors.New("BaseMessageProperties has no properties")
	}
	props["biz_opaque_callback_data"] = map[string]any{"type": "string", "maxLength": json.Number("512")}
	return nil
}

func numericCoordinates(doc map[string]any) error {
	loc, err := schema(doc, "LocationMessage")
	if err != nil {
		return err
	}
	n := 0
	walk(loc, func(s map[string]any) {
		props, ok := s["properties"].(map[string]any)
		if !ok {
			return
		}
		for _, k := range []string{"latitude", "longitude"} {
			if p, ok := props[k].(map[string]any); ok {
				p["type"] = []any{"number", "string"}
				n++
			}
		}
	})
	if n != 2 {
		return fmt.Errorf("found %d coordinates, want 2", n)
	}
	return nil
}

func buttonIndex(doc map[string]any) error {
	n := 0
	for _, name := range []string{"TemplateComponent", "ButtonComponent"} {
		s, err := schema(doc, name)
		if err != nil {
			return err
		}
		walk(s, func(o map[string]any) {
			props, ok := o["properties"].(map[string]any)
			if !ok {
				return
			}
			if _, ok := props["index"].(map[string]any); ok {
				props["index"] = map[string]any{"type": []any{"integer", "string"}, "minimum": json.Number("0"), "pattern": "^[0-9]+$"}
				n++
			}
		})
	}
	if n != 2 {
		return fmt.Errorf("found %d index properties, want 2", n)
	}
	return nil
}

// inboundBase gives the webhook's message schemas the properties of what a
// contact sent: copies of every schema reachable from IncomingMessage and
// SystemMessage, renamed Inbound*, with BaseMessageProperties replaced.
func inboundBase(doc map[string]any) error {
	all, err := schemas(doc)
	if err != nil {
		return err
	}
	const prefix = "#/components/schemas/"
	all["InboundMessageProperties"] = map[string]any{
		"type":     "object",
		"required": []any{"from", "id", "timestamp", "type"},
		"properties": map[string]any{
			"from":      map[string]any{"type": "string"},
			"id":        map[string]any{"type": "string"},
			"timestamp": map[string]any{"type": "string"},
			"type":      map[string]any{"type": "string"},
			"context": map[string]any{"type": "object", "properties": map[string]any{
				"from": map[string]any{"type": "string"}, "id": map[string]any{"type": "string"},
				"forwarded": map[string]any{"type": "boolean"}, "frequently_forwarded": map[string]any{"type": "boolean"},
				"referred_product": map[string]any{"type": "object"},
			}},
			"referral":    map[string]any{"type": "object"},
			"identity":    map[string]any{"type": "object"},
			"group_id":    map[string]any{"type": "string"},
			"errors":      map[string]any{"type": "array"},
			"interactive": map[string]any{"type": "object"},
		},
	}
	// The message schemas whose base changes, and everything between them
	// and the roots: copied, so the send side keeps the document's schemas.
	copied := map[string]string{"BaseMessageProperties": "InboundMessageProperties"}
	var visit func(name string) error
	visit = func(name string) error {
		if _, done := copied[name]; done {
			return nil
		}
		s, ok := all[name]
		if !ok {
			return fmt.Errorf("no schema %s", name)
		}
		if !strings.Contains(mustJSON(s), prefix+"BaseMessageProperties") && !reaches(all, name, map[string]bool{}) {
			copied[name] = name
			return nil
		}
		copied[name] = "Inbound" + name
		for _, ref := range refsOf(s) {
			if err := visit(ref); err != nil {
				return err
			}
		}
		return nil
	}
	for _, root := range []string{"IncomingMessage", "SystemMessage"} {
		if err := visit(root); err != nil {
			return err
		}
	}
	for from, to := range copied {
		if from == to || from == "BaseMessageProperties" {
			continue
		}
		all[to] = renameRefs(deepCopy(all[from]), copied)
	}
	// A sticker a contact sends is described like any inbound media, not
	// like the send side's {id} | {link}.
	if err := set(doc, map[string]any{"type": "object", "required": strs("id"), "properties": map[string]any{
		"id": map[string]any{"type": "string"}, "mime_type": map[string]any{"type": "string"},
		"sha256": map[string]any{"type": "string"}, "animated": map[string]any{"type": "boolean"},
	}}, "InboundStickerMessage", "allOf", "1", "properties", "sticker"); err != nil {
		return err
	}
	// The values that list messages now point at the inbound copies.
	for _, owner := range []string{"IncomingMessageValueGeneral", "IncomingMessageValueSystem"} {
		s, err := schema(doc, owner)
		if err != nil {
			return err
		}
		items, ok := dig(s, "properties", "messages", "items").(map[string]any)
		if !ok {
			return fmt.Errorf("%s has no messages items", owner)
		}
		ref, _ := items["$ref"].(string)
		items["$ref"] = prefix + copied[strings.TrimPrefix(ref, prefix)]
	}
	return nil
}

// reaches reports whether schema name refers, directly or not, to
// BaseMessageProperties.
func reaches(all map[string]any, name string, seen map[string]bool) bool {
	if seen[name] {
		return false
	}
	seen[name] = true
	for _, ref := range refsOf(all[name]) {
		if ref == "BaseMessageProperties" || reaches(all, ref, seen) {
			return true
		}
	}
	return false
}

func refsOf(v any) []string {
	var out []string
	walk(v, func(m map[string]any) {
		if r, ok := m["$ref"].(string); ok && strings.HasPrefix(r, "#/components/schemas/") {
			out = append(out, strings.TrimPrefix(r, "#/components/schemas/"))
		}
	})
	return out
}

func renameRefs(v any, names map[string]string) any {
	walk(v, func(m map[string]any) {
		if r, ok := m["$ref"].(string); ok {
			if to, ok := names[strings.TrimPrefix(r, "#/components/schemas/")]; ok {
				m["$ref"] = "#/components/schemas/" + to
			}
		}
	})
	return v
}

func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, c := range t {
			out[k] = deepCopy(c)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, c := range t {
			out[i] = deepCopy(c)
		}
		return out
	}
	return v
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// RequestExamples are the document's named request examples of op (the
// send examples, the webhook examples), as JSON.
func (d *Document) RequestExamples(op string) (map[string][]byte, error) {
	path := map[string]string{OpSendMessage: sendMessagePath, OpWebhook: webhookPath}[op]
	if path == "" {
		return nil, fmt.Errorf("no examples for %s", op)
	}
	ex, ok := dig(d.raw, "paths", path, "post", "requestBody", "content", "application/json", "examples").(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s has no examples", op)
	}
	out := make(map[string][]byte, len(ex))
	for name, e := range ex {
		b, err := json.Marshal(dig(e, "value"))
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// stringKeys turns the YAML maps with non-string keys (an unquoted 200
// response code) into JSON objects.
func stringKeys(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, c := range t {
			t[k] = stringKeys(c)
		}
	case map[any]any:
		out := make(map[string]any, len(t))
		for k, c := range t {
			out[fmt.Sprint(k)] = stringKeys(c)
		}
		return out
	case []any:
		for i, c := range t {
			t[i] = stringKeys(c)
		}
	}
	return v
}

// set replaces the value at path under components/schemas/<name>.
func set(doc map[string]any, value any, name string, path ...string) error {
	s, err := schema(doc, name)
	if err != nil {
		return err
	}
	parent := any(s)
	for _, p := range path[:len(path)-1] {
		parent = dig(parent, p)
	}
	m, ok := parent.(map[string]any)
	if !ok {
		return fmt.Errorf("%s has no %s", name, strings.Join(path, "/"))
	}
	if _, ok := m[path[len(path)-1]]; !ok {
		return fmt.Errorf("%s has no %s", name, strings.Join(path, "/"))
	}
	m[path[len(path)-1]] = value
	return nil
}

func strs(v ...string) []any {
	out := make([]any, len(v))
	for i, s := range v {
		out[i] = s
	}
	return out
}

func platformDefaults(doc map[string]any) error {
	return errors.Join(
		set(doc, strs("messaging_product", "to"), "BaseMessageProperties", "required"),
		set(doc, strs("code"), "LanguageObject", "required"))
}

func buttonSubTypes(doc map[string]any) error {
	sub := map[string]any{"type": "string", "enum": strs("quick_reply", "url", "catalog", "flow", "copy_code",
		"QUICK_REPLY", "URL", "CATALOG", "FLOW", "COPY_CODE")}
	return errors.Join(
		set(doc, sub, "TemplateComponent", "properties", "sub_type"),
		set(doc, sub, "ButtonComponent", "allOf", "1", "properties", "sub_type"),
		set(doc, map[string]any{"type": "string", "enum": strs("payload", "text", "action")}, "ButtonParameterObject", "properties", "type"))
}

func orderActions(doc map[string]any) error {
	s, err := schema(doc, "ActionObject")
	if err != nil {
		return err
	}
	branches, ok := s["oneOf"].([]any)
	if !ok {
		return errors.New("ActionObject has no oneOf")
	}
	if err := set(doc, map[string]any{"type": "string", "enum": strs("button", "call_permission_request", "catalog_message", "list",
		"product", "product_list", "flow", "order_details", "order_status")}, "InteractiveObject", "properties", "type"); err != nil {
		return err
	}
	s["oneOf"] = append(branches, map[string]any{
		"required": strs("name", "parameters"),
		"properties": map[string]any{
			"name":       map[string]any{"type": "string", "enum": strs("review_and_pay", "review_order")},
			"parameters": map[string]any{"type": "object"},
		},
	})
	return nil
}

func markAsRead(doc map[string]any) error {
	all, err := schemas(doc)
	if err != nil {
		return err
	}
	all["MarkAsRead"] = map[string]any{
		"type":                 "object",
		"required":             strs("messaging_product", "status", "message_id"),
		"additionalProperties": false,
		"properties": map[string]any{
			"messaging_product": map[string]any{"type": "string"},
			"status":            map[string]any{"type": "string", "enum": strs("read")},
			"message_id":        map[string]any{"type": "string"},
			"typing_indicator": map[string]any{"type": "object", "additionalProperties": false, "required": strs("type"),
				"properties": map[string]any{"type": map[string]any{"type": "string", "enum": strs("text")}}},
		},
	}
	op, ok := dig(doc, "paths", sendMessagePath, "post", "requestBody", "content", "application/json").(map[string]any)
	if !ok {
		return errors.New("no send request body")
	}
	op["schema"] = map[string]any{"oneOf": []any{
		map[string]any{"$ref": "#/components/schemas/Message"},
		map[string]any{"$ref": "#/components/schemas/MarkAsRead"},
	}}
	return nil
}

func webhookExamples(doc map[string]any) error {
	str := func(t ...string) map[string]any { return map[string]any{"type": strs(t...)} }
	return errors.Join(
		set(doc, map[string]any{"type": "string", "enum": strs("messages", "group_lifecycle_update", "group_settings_update",
			"group_participant_update", "group_participants_update")}, "Change", "properties", "field"),
		set(doc, str("integer", "string"), "Groups", "properties", "timestamp"),
		set(doc, str("string", "integer"), "GroupParticipant", "properties", "input"),
		set(doc, str("string", "integer"), "GroupParticipant", "properties", "wa_id"),
		set(doc, map[string]any{"type": "string"}, "PhoneObject", "properties", "type"),
		set(doc, strs("message", "code"), "ErrorObject", "required"),
		func() error { // url sits beside name in a location a contact shares
			props, ok := dig(doc, "components", "schemas", "LocationMessage", "allOf", "1", "properties", "location", "properties").(map[string]any)
			if !ok {
				return errors.New("LocationMessage has no location properties")
			}
			props["url"] = map[string]any{"type": "string"}
			return nil
		}(),
	)
}

func applyDiscriminators(doc map[string]any) error {
	all, err := schemas(doc)
	if err != nil {
		return err
	}
	const prefix = "#/components/schemas/"
	n := 0
	for _, name := range []string{"TemplateComponent", "ParameterObject"} {
		base, _ := all[name].(map[string]any)
		prop, _ := dig(base, "discriminator", "propertyName").(string)
		mapping, _ := dig(base, "discriminator", "mapping").(map[string]any)
		if prop == "" || len(mapping) == 0 {
			return fmt.Errorf("%s has no discriminator", name)
		}
		var conds []any
		for value, ref := range mapping {
			target := strings.TrimPrefix(ref.(string), prefix)
			members, _ := dig(all, target, "allOf").([]any)
			var own []any
			for i, m := range members {
				if r, _ := dig(m, "$ref").(string); r != prefix+name {
					own = append(own, map[string]any{"$ref": prefix + target + "/allOf/" + strconv.Itoa(i)})
				}
			}
			if len(own) == 0 {
				return fmt.Errorf("%s: mapped schema %s has no own member", name, target)
			}
			conds = append(conds, map[string]any{
				"if":   map[string]any{"required": strs(prop), "properties": map[string]any{prop: map[string]any{"const": value}}},
				"then": map[string]any{"allOf": own},
			})
			n++
		}
		base["allOf"] = conds
	}
	if n == 0 {
		return errors.New("no discriminator mapping")
	}
	return nil
}
