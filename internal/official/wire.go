package official

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// The provider's wire format, as its published OpenAPI document (Graph API
// v23.0) describes it: what the client sends and reads. Field names are the
// platform's. internal/providersim validates these requests against the
// document itself (client_contract_test.go), without sharing these types.

// SendRequest is the body of POST /{phone-number-id}/messages.
type SendRequest struct {
	MessagingProduct string `json:"messaging_product"`
	RecipientType    string `json:"recipient_type,omitempty"`
	To               string `json:"to"`
	Type             string `json:"type"`
	// BizOpaqueCallbackData is echoed in status webhooks; the gateway puts
	// its message id there for diagnosis.
	BizOpaqueCallbackData string `json:"biz_opaque_callback_data,omitempty"`
	// Context makes the message a reply to one of the conversation's.
	Context  *MessageContext `json:"context,omitempty"`
	Text     *TextBody       `json:"text,omitempty"`
	Image    *MediaObject    `json:"image,omitempty"`
	Video    *MediaObject    `json:"video,omitempty"`
	Audio    *MediaObject    `json:"audio,omitempty"`
	Document *MediaObject    `json:"document,omitempty"`
	Template *TemplateObj    `json:"template,omitempty"`
}

// MessageContext is the message a send answers.
type MessageContext struct {
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
	MessagingProduct string   `json:"messaging_product"`
	URL              string   `json:"url"`
	MimeType         string   `json:"mime_type"`
	SHA256           string   `json:"sha256"`
	FileSize         flexSize `json:"file_size"`
	ID               string   `json:"id"`
}

// flexSize is a byte count the provider's document types as a string
// ("303833") while the platform has also been seen answering a number:
// both decode.
type flexSize int64

func (f *flexSize) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "" || s == "null" {
		*f = 0
		return nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return fmt.Errorf("file_size %s: %w", b, err)
	}
	*f = flexSize(n)
	return nil
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

// WebhookChange is one change notification: field messages (messages and
// statuses) or one of the group notifications.
type WebhookChange struct {
	Field string       `json:"field"`
	Value WebhookValue `json:"value"`
}

// WebhookValue carries inbound messages, status receipts and group
// notifications of one number.
type WebhookValue struct {
	MessagingProduct string `json:"messaging_product"`
	Metadata         struct {
		DisplayPhoneNumber string `json:"display_phone_number"`
		PhoneNumberID      string `json:"phone_number_id"`
	} `json:"metadata"`
	Contacts []WebhookContact    `json:"contacts,omitempty"`
	Messages []InboundMessage    `json:"messages,omitempty"`
	Statuses []StatusUpdate      `json:"statuses,omitempty"`
	Groups   []GroupNotification `json:"groups,omitempty"`
}

// GroupNotification is a change of a group the business number is in.
// The document's examples send timestamps as strings and participants as
// numbers, its schema the other way round: both decode.
type GroupNotification struct {
	Timestamp           flexString         `json:"timestamp"`
	GroupID             string             `json:"group_id"`
	Type                string             `json:"type"`
	RequestID           string             `json:"request_id"`
	Subject             string             `json:"subject,omitempty"`
	AddedParticipants   []GroupParticipant `json:"added_participants,omitempty"`
	RemovedParticipants []GroupParticipant `json:"removed_participants,omitempty"`
}

// GroupParticipant is a member added to or removed from a group.
type GroupParticipant struct {
	Input flexString `json:"input"`
	WaID  flexString `json:"wa_id"`
}

// flexString is a string or a number of the payload, as text.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	var s string
	if json.Unmarshal(b, &s) == nil {
		*f = flexString(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(b, &n); err != nil {
		return err
	}
	*f = flexString(n.String())
	return nil
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
		Latitude  json.Number `json:"latitude"`
		Longitude json.Number `json:"longitude"`
		Name      string      `json:"name,omitempty"`
		Address   string      `json:"address,omitempty"`
		URL       string      `json:"url,omitempty"`
	} `json:"location,omitempty"`
	Button *struct {
		Text    string `json:"text"`
		Payload string `json:"payload"`
	} `json:"button,omitempty"`
	Reaction *struct {
		MessageID string `json:"message_id"`
		Emoji     string `json:"emoji"`
	} `json:"reaction,omitempty"`
	Interactive *struct {
		Type        string `json:"type"`
		ButtonReply *struct {
			ID    string `json:"id"`
			Title string `json:"title"`
		} `json:"button_reply,omitempty"`
		ListReply *struct {
			ID          string `json:"id"`
			Title       string `json:"title"`
			Description string `json:"description,omitempty"`
		} `json:"list_reply,omitempty"`
	} `json:"interactive,omitempty"`
	Contacts []SharedContact `json:"contacts,omitempty"`
	Order    *struct {
		CatalogID    string `json:"catalog_id"`
		Text         string `json:"text"`
		ProductItems []struct {
			ProductRetailerID string      `json:"product_retailer_id"`
			Quantity          json.Number `json:"quantity"`
			ItemPrice         json.Number `json:"item_price"`
			Currency          string      `json:"currency"`
		} `json:"product_items"`
	} `json:"order,omitempty"`
	System *struct {
		Body    string `json:"body"`
		Type    string `json:"type"`
		WaID    string `json:"wa_id,omitempty"`
		NewWaID string `json:"new_wa_id,omitempty"`
	} `json:"system,omitempty"`
	Errors   []StatusError `json:"errors,omitempty"`
	Referral *struct {
		SourceURL  string `json:"source_url"`
		SourceType string `json:"source_type"`
		Headline   string `json:"headline"`
		Body       string `json:"body"`
	} `json:"referral,omitempty"`
	Context *struct {
		From            string `json:"from"`
		ID              string `json:"id"`
		Forwarded       bool   `json:"forwarded,omitempty"`
		ReferredProduct *struct {
			CatalogID         string `json:"catalog_id"`
			ProductRetailerID string `json:"product_retailer_id"`
		} `json:"referred_product,omitempty"`
	} `json:"context,omitempty"`
}

// SharedContact is a contact card a contact sent.
type SharedContact struct {
	Name struct {
		FormattedName string `json:"formatted_name"`
		FirstName     string `json:"first_name"`
		LastName      string `json:"last_name"`
	} `json:"name"`
	Org struct {
		Company string `json:"company"`
	} `json:"org"`
	Phones []struct {
		Phone string `json:"phone"`
		WaID  string `json:"wa_id"`
		Type  string `json:"type"`
	} `json:"phones"`
	Emails []struct {
		Email string `json:"email"`
	} `json:"emails"`
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
	Conversation          *struct {
		ID     string `json:"id"`
		Origin struct {
			Type string `json:"type"`
		} `json:"origin"`
	} `json:"conversation,omitempty"`
	Pricing *struct {
		Billable     bool   `json:"billable"`
		PricingModel string `json:"pricing_model"`
		Category     string `json:"category"`
	} `json:"pricing,omitempty"`
}

// StatusError explains a failed status.
type StatusError struct {
	Code      int    `json:"code"`
	Title     string `json:"title"`
	Message   string `json:"message,omitempty"`
	Href      string `json:"href,omitempty"`
	ErrorData struct {
		Details string `json:"details"`
	} `json:"error_data"`
}
