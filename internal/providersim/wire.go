package providersim

import "encoding/json"

// The provider's wire format as its document describes it (schemas
// Message, MediaObject, TemplateObject, WebhookPayload, …), written from
// the document and not shared with the gateway's client: a mistake in the
// client's types shows up here as a refusal. The type names follow what
// the simulator's users already call them.

// SendRequest is a send as the simulator reads it, after the document's
// validation (fields the simulator does not act on are kept in the raw
// body of SentMessage).
type SendRequest struct {
	MessagingProduct      string        `json:"messaging_product"`
	RecipientType         string        `json:"recipient_type,omitempty"`
	To                    string        `json:"to"`
	Type                  string        `json:"type"`
	BizOpaqueCallbackData string        `json:"biz_opaque_callback_data,omitempty"`
	Context               *ContextObj   `json:"context,omitempty"`
	Text                  *TextBody     `json:"text,omitempty"`
	Image                 *MediaObject  `json:"image,omitempty"`
	Video                 *MediaObject  `json:"video,omitempty"`
	Audio                 *MediaObject  `json:"audio,omitempty"`
	Document              *MediaObject  `json:"document,omitempty"`
	Sticker               *MediaObject  `json:"sticker,omitempty"`
	Template              *TemplateObj  `json:"template,omitempty"`
	Reaction              *ReactionObj  `json:"reaction,omitempty"`
	Location              *LocationObj  `json:"location,omitempty"`
	Contacts              []ContactCard `json:"contacts,omitempty"`
	// Status is "read" on a mark-as-read request to the same operation.
	Status    string `json:"status,omitempty"`
	MessageID string `json:"message_id,omitempty"`
}

// ContextObj is the message a send answers (MessageContext).
type ContextObj struct {
	MessageID string `json:"message_id"`
}

// TextBody is a text message.
type TextBody struct {
	Body       string `json:"body"`
	PreviewURL bool   `json:"preview_url,omitempty"`
}

// MediaObject references uploaded media by id, or media by link.
type MediaObject struct {
	ID       string `json:"id,omitempty"`
	Link     string `json:"link,omitempty"`
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// ReactionObj is an emoji reaction to a message.
type ReactionObj struct {
	MessageID string `json:"message_id"`
	Emoji     string `json:"emoji"`
}

// LocationObj is a shared location; the document's examples send numbers.
type LocationObj struct {
	Latitude  json.Number `json:"latitude"`
	Longitude json.Number `json:"longitude"`
	Name      string      `json:"name,omitempty"`
	Address   string      `json:"address,omitempty"`
	URL       string      `json:"url,omitempty"`
}

// ContactCard is a shared contact (ContactObject), kept as the document's
// JSON.
type ContactCard = map[string]any

// TemplateObj is a template send.
type TemplateObj struct {
	Name       string              `json:"name"`
	Language   TemplateLanguage    `json:"language"`
	Components []TemplateComponent `json:"components,omitempty"`
}

// TemplateLanguage is the template's locale.
type TemplateLanguage struct {
	Code   string `json:"code"`
	Policy string `json:"policy,omitempty"`
}

// TemplateComponent carries the parameters of one component of a sent
// template; index is a string or an integer in the document's examples.
type TemplateComponent struct {
	Type       string              `json:"type"`
	SubType    string              `json:"sub_type,omitempty"`
	Index      json.RawMessage     `json:"index,omitempty"`
	Parameters []TemplateParameter `json:"parameters"`
}

// TemplateParameter is one parameter value.
type TemplateParameter struct {
	Type          string       `json:"type"`
	ParameterName string       `json:"parameter_name,omitempty"`
	Text          *string      `json:"text,omitempty"`
	Payload       string       `json:"payload,omitempty"`
	Image         *MediaObject `json:"image,omitempty"`
	Video         *MediaObject `json:"video,omitempty"`
	Document      *MediaObject `json:"document,omitempty"`
}

// SendResponse is the answer to an accepted send.
type SendResponse struct {
	MessagingProduct string       `json:"messaging_product"`
	Contacts         []SentTo     `json:"contacts"`
	Messages         []SentStatus `json:"messages"`
}

// SentTo is a recipient of an accepted send.
type SentTo struct {
	Input string `json:"input"`
	WaID  string `json:"wa_id"`
}

// SentStatus is the id of an accepted message.
type SentStatus struct {
	ID            string `json:"id"`
	MessageStatus string `json:"message_status,omitempty"`
}

// MediaUploadResponse is the answer of an upload.
type MediaUploadResponse struct {
	ID string `json:"id"`
}

// MediaInfo is the answer of a media lookup; the document types file_size
// as a string.
type MediaInfo struct {
	MessagingProduct string `json:"messaging_product"`
	URL              string `json:"url"`
	MimeType         string `json:"mime_type"`
	SHA256           string `json:"sha256"`
	FileSize         string `json:"file_size"`
	ID               string `json:"id"`
}

// ErrorBody is every error answer.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the provider's error.
type ErrorObject struct {
	Message      string    `json:"message"`
	Type         string    `json:"type"`
	Code         int       `json:"code"`
	ErrorSubcode int       `json:"error_subcode,omitempty"`
	ErrorData    ErrorData `json:"error_data"`
	FBTraceID    string    `json:"fbtrace_id,omitempty"`
}

// ErrorData carries the readable reason of an error.
type ErrorData struct {
	MessagingProduct string `json:"messaging_product,omitempty"`
	Details          string `json:"details"`
}

// Template is one entry of the template listing.
type Template struct {
	ID              string                 `json:"id"`
	Name            string                 `json:"name"`
	Language        string                 `json:"language"`
	Status          string                 `json:"status"`
	Category        string                 `json:"category"`
	ParameterFormat string                 `json:"parameter_format,omitempty"`
	Components      []TemplateDefComponent `json:"components"`
}

// TemplateDefComponent is a component of a template definition.
type TemplateDefComponent struct {
	Type    string           `json:"type"`
	Format  string           `json:"format,omitempty"`
	Text    string           `json:"text,omitempty"`
	Buttons []TemplateButton `json:"buttons,omitempty"`
	Example *TemplateExample `json:"example,omitempty"`
}

// TemplateButton is a button of a BUTTONS component.
type TemplateButton struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	URL         string `json:"url,omitempty"`
	PhoneNumber string `json:"phone_number,omitempty"`
}

// TemplateExample carries sample values.
type TemplateExample struct {
	HeaderHandle []string   `json:"header_handle,omitempty"`
	HeaderText   []string   `json:"header_text,omitempty"`
	BodyText     [][]string `json:"body_text,omitempty"`
}

// TemplatePage is one page of the template listing.
type TemplatePage struct {
	Data   []Template `json:"data"`
	Paging Paging     `json:"paging"`
}

// Paging holds the cursors of a page.
type Paging struct {
	Cursors struct {
		Before string `json:"before,omitempty"`
		After  string `json:"after,omitempty"`
	} `json:"cursors"`
	Next string `json:"next,omitempty"`
}

// The webhook the simulator POSTs (WebhookPayload).
type webhookPayload struct {
	Object string         `json:"object"`
	Entry  []webhookEntry `json:"entry"`
}

type webhookEntry struct {
	ID      string          `json:"id"`
	Changes []webhookChange `json:"changes"`
}

type webhookChange struct {
	Field string       `json:"field"`
	Value webhookValue `json:"value"`
}

type webhookMetadata struct {
	DisplayPhoneNumber string `json:"display_phone_number"`
	PhoneNumberID      string `json:"phone_number_id"`
}

type webhookValue struct {
	MessagingProduct string            `json:"messaging_product"`
	Metadata         webhookMetadata   `json:"metadata"`
	Contacts         []webhookContact  `json:"contacts,omitempty"`
	Messages         []json.RawMessage `json:"messages,omitempty"`
	Statuses         []statusUpdate    `json:"statuses,omitempty"`
}

type webhookContact struct {
	Profile struct {
		Name string `json:"name"`
	} `json:"profile"`
	WaID string `json:"wa_id"`
}

// inboundMessage is a message a contact sent, as the simulator builds it.
type inboundMessage struct {
	From      string        `json:"from"`
	ID        string        `json:"id"`
	Timestamp string        `json:"timestamp"`
	Type      string        `json:"type"`
	Context   *inboundCtx   `json:"context,omitempty"`
	Text      *TextBody     `json:"text,omitempty"`
	Image     *inboundMedia `json:"image,omitempty"`
	Video     *inboundMedia `json:"video,omitempty"`
	Audio     *inboundMedia `json:"audio,omitempty"`
	Document  *inboundMedia `json:"document,omitempty"`
	Sticker   *inboundMedia `json:"sticker,omitempty"`
}

type inboundCtx struct {
	From string `json:"from"`
	ID   string `json:"id"`
}

type inboundMedia struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	SHA256   string `json:"sha256,omitempty"`
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
}

type statusUpdate struct {
	ID                    string        `json:"id"`
	Status                string        `json:"status"`
	Timestamp             string        `json:"timestamp"`
	RecipientID           string        `json:"recipient_id"`
	BizOpaqueCallbackData string        `json:"biz_opaque_callback_data,omitempty"`
	Conversation          *conversation `json:"conversation,omitempty"`
	Pricing               *pricing      `json:"pricing,omitempty"`
	Errors                []statusError `json:"errors,omitempty"`
}

type conversation struct {
	ID     string `json:"id"`
	Origin struct {
		Type string `json:"type"`
	} `json:"origin"`
	ExpirationTimestamp string `json:"expiration_timestamp,omitempty"`
}

type pricing struct {
	Billable     bool   `json:"billable"`
	PricingModel string `json:"pricing_model"`
	Category     string `json:"category"`
}

type statusError struct {
	Code      int       `json:"code"`
	Title     string    `json:"title"`
	Message   string    `json:"message,omitempty"`
	ErrorData ErrorData `json:"error_data"`
}
