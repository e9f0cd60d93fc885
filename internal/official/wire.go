package official

// The provider's Cloud-API-style wire format: what the client sends and
// reads, and what providersim serves. Field names are the platform's.

// SendRequest is the body of POST /{phone-number-id}/messages.
type SendRequest struct {
	MessagingProduct string `json:"messaging_product"`
	RecipientType    string `json:"recipient_type,omitempty"`
	To               string `json:"to"`
	Type             string `json:"type"`
	// BizOpaqueCallbackData is echoed in status webhooks; the gateway puts
	// its message id there for diagnosis.
	BizOpaqueCallbackData string       `json:"biz_opaque_callback_data,omitempty"`
	Text                  *TextBody    `json:"text,omitempty"`
	Image                 *MediaObject `json:"image,omitempty"`
	Video                 *MediaObject `json:"video,omitempty"`
	Audio                 *MediaObject `json:"audio,omitempty"`
	Document              *MediaObject `json:"document,omitempty"`
	Template              *TemplateObj `json:"template,omitempty"`
	// Edit and Revoke are the forwarded edit and revoke-for-everyone
	// requests; the platform refuses them on this channel.
	Edit   *EditObject   `json:"edit,omitempty"`
	Revoke *RevokeObject `json:"revoke,omitempty"`
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

// TemplateObj is a template send.
type TemplateObj struct {
	Name       string              `json:"name"`
	Language   TemplateLanguage    `json:"language"`
	Components []TemplateComponent `json:"components,omitempty"`
}

// TemplateLanguage is the template's locale.
type TemplateLanguage struct {
	Code string `json:"code"`
}

// TemplateComponent carries the parameters of one component of a sent
// template.
type TemplateComponent struct {
	Type       string              `json:"type"` // header, body, button
	SubType    string              `json:"sub_type,omitempty"`
	Index      string              `json:"index,omitempty"`
	Parameters []TemplateParameter `json:"parameters"`
}

// TemplateParameter is one parameter value.
type TemplateParameter struct {
	Type          string       `json:"type"` // text, image, video, document
	ParameterName string       `json:"parameter_name,omitempty"`
	Text          *string      `json:"text,omitempty"`
	Image         *MediaObject `json:"image,omitempty"`
	Video         *MediaObject `json:"video,omitempty"`
	Document      *MediaObject `json:"document,omitempty"`
}

// EditObject asks to replace the text of a sent message.
type EditObject struct {
	MessageID string   `json:"message_id"`
	Text      TextBody `json:"text"`
}

// RevokeObject asks to revoke a sent message for everyone.
type RevokeObject struct {
	MessageID string `json:"message_id"`
}

// SendResponse is the provider's answer to an accepted send.
type SendResponse struct {
	MessagingProduct string `json:"messaging_product"`
	Contacts         []struct {
		Input string `json:"input"`
		WaID  string `json:"wa_id"`
	} `json:"contacts"`
	Messages []struct {
		ID            string `json:"id"`
		MessageStatus string `json:"message_status,omitempty"`
	} `json:"messages"`
}

// MediaUploadResponse is the answer of POST /{phone-number-id}/media.
type MediaUploadResponse struct {
	ID string `json:"id"`
}

// MediaInfo is the answer of GET /{media-id}.
type MediaInfo struct {
	MessagingProduct string `json:"messaging_product"`
	URL              string `json:"url"`
	MimeType         string `json:"mime_type"`
	SHA256           string `json:"sha256"`
	FileSize         int64  `json:"file_size"`
	ID               string `json:"id"`
}

// ErrorBody is every error answer: {error:{message,type,code,error_data:{details}}}.
type ErrorBody struct {
	Error ErrorObject `json:"error"`
}

// ErrorObject is the provider's error.
type ErrorObject struct {
	Message      string `json:"message"`
	Type         string `json:"type"`
	Code         int    `json:"code"`
	ErrorSubcode int    `json:"error_subcode,omitempty"`
	ErrorData    struct {
		MessagingProduct string `json:"messaging_product,omitempty"`
		Details          string `json:"details"`
	} `json:"error_data"`
	FBTraceID string `json:"fbtrace_id,omitempty"`
}

// Template is one entry of GET /{business-account-id}/message_templates.
type Template struct {
	ID              string                 `json:"id"`
	Name            string                 `json:"name"`
	Language        string                 `json:"language"`
	Status          string                 `json:"status"`
	Category        string                 `json:"category"`
	ParameterFormat string                 `json:"parameter_format,omitempty"` // POSITIONAL or NAMED
	Components      []TemplateDefComponent `json:"components"`
}

// TemplateDefComponent is a component of a template definition.
type TemplateDefComponent struct {
	Type    string           `json:"type"` // HEADER, BODY, FOOTER, BUTTONS
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

// TemplateExample carries sample values; header_handle holds the media
// registered with a media header.
type TemplateExample struct {
	HeaderHandle []string   `json:"header_handle,omitempty"`
	HeaderText   []string   `json:"header_text,omitempty"`
	BodyText     [][]string `json:"body_text,omitempty"`
}

// TemplatePage is one page of the template listing.
type TemplatePage struct {
	Data   []Template `json:"data"`
	Paging struct {
		Cursors struct {
			Before string `json:"before,omitempty"`
			After  string `json:"after,omitempty"`
		} `json:"cursors"`
		Next string `json:"next,omitempty"`
	} `json:"paging"`
}

// WebhookPayload is the body of an inbound provider webhook.
type WebhookPayload struct {
	Object string         `json:"object"`
	Entry  []WebhookEntry `json:"entry"`
}

// WebhookEntry is one business account's changes.
type WebhookEntry struct {
	ID      string          `json:"id"`
	Changes []WebhookChange `json:"changes"`
}

// WebhookChange is one change notification.
type WebhookChange struct {
	Field string       `json:"field"`
	Value WebhookValue `json:"value"`
}

// WebhookValue carries inbound messages and status receipts of one number.
type WebhookValue struct {
	MessagingProduct string `json:"messaging_product"`
	Metadata         struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []WebhookContact `json:"contacts,omitempty"`
	Messages []InboundMessage `json:"messages,omitempty"`
	Statuses []StatusUpdate   `json:"statuses,omitempty"`
}

// WebhookContact is the profile of a contact who wrote.
type WebhookContact struct {
	Profile struct {
		Name string `json:"name"`
	} `json:"profile"`
	WaID string `json:"wa_id"`
}

// InboundMessage is a message a contact sent.
type InboundMessage struct {
	From      string        `json:"from"`
	ID        string        `json:"id"`
	Timestamp string        `json:"timestamp"`
	Type      string        `json:"type"`
	Text      *TextBody     `json:"text,omitempty"`
	Image     *InboundMedia `json:"image,omitempty"`
	Video     *InboundMedia `json:"video,omitempty"`
	Audio     *InboundMedia `json:"audio,omitempty"`
	Document  *InboundMedia `json:"document,omitempty"`
	Sticker   *InboundMedia `json:"sticker,omitempty"`
	Location  *struct {
		Latitude  float64 `json:"latitude"`
		Longitude float64 `json:"longitude"`
		Name      string  `json:"name,omitempty"`
		Address   string  `json:"address,omitempty"`
	} `json:"location,omitempty"`
	Button *struct {
		Text    string `json:"text"`
		Payload string `json:"payload"`
	} `json:"button,omitempty"`
	Context *struct {
		From      string `json:"from"`
		ID        string `json:"id"`
		Forwarded bool   `json:"forwarded,omitempty"`
	} `json:"context,omitempty"`
}

// InboundMedia references media a contact sent.
type InboundMedia struct {
	ID       string `json:"id"`
	MimeType string `json:"mime_type"`
	SHA256   string `json:"sha256,omitempty"`
	Caption  string `json:"caption,omitempty"`
	Filename string `json:"filename,omitempty"`
}

// StatusUpdate is a delivery receipt.
type StatusUpdate struct {
	ID                    string        `json:"id"`
	Status                string        `json:"status"` // sent, delivered, read, failed
	Timestamp             string        `json:"timestamp"`
	RecipientID           string        `json:"recipient_id"`
	BizOpaqueCallbackData string        `json:"biz_opaque_callback_data,omitempty"`
	Errors                []StatusError `json:"errors,omitempty"`
}

// StatusError explains a failed status.
type StatusError struct {
	Code      int    `json:"code"`
	Title     string `json:"title"`
	Message   string `json:"message,omitempty"`
	ErrorData struct {
		Details string `json:"details"`
	} `json:"error_data"`
}
