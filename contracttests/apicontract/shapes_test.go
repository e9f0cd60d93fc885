//go:build contract

package apicontract

import (
	"github.com/pact-foundation/pact-go/v2/matchers"
)

// What integrators rely on, as matchers. Pact regexes are unanchored, so
// each carries ^…$. Examples are what the consumer tests see.
const (
	// managementTimeRE is "YYYY-MM-DD HH:MM:SS" (management resources).
	managementTimeRE = `^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}$`
	// offsetTimeRE is ISO 8601 with an offset (conversations, windows).
	offsetTimeRE = `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$`
	// microUTCRE is ISO 8601 UTC with microseconds (the edit answer).
	microUTCRE = `^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`
	uuidRE     = `^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`
	// secretRE: the document promises at least 32 characters, nothing more.
	secretRE = `^\S{32,}$`
)

func managementTime() matchers.Matcher {
	return matchers.Regex("2026-11-22 14:03:07", managementTimeRE)
}

func offsetTime(example string) matchers.Matcher { return matchers.Regex(example, offsetTimeRE) }

// fromState is a request value the verifier takes from the provider state
// (an id the state created); example is what the consumer test sends. It
// is the FFI's integration JSON, because pact-go's FromProviderState has
// no data type and would turn an integer id into a string.
func fromState(expression string, example int) map[string]any {
	return map[string]any{
		"pact:matcher:type":   "integer",
		"pact:generator:type": "ProviderState",
		"expression":          expression,
		"dataType":            "INTEGER",
		"value":               example,
	}
}

// pathFromState is a request path with a provider-state id in it.
func pathFromState(expression, example string) matchers.Matcher {
	return matchers.FromProviderState(expression, example)
}

// page is the list envelope of the API: {current_page, per_page, total,
// last_page, data}, with at least one item shaped like item.
func page(item map[string]any) map[string]any {
	return map[string]any{
		"current_page": matchers.Integer(1),
		"per_page":     matchers.Integer(100),
		"total":        matchers.Integer(1),
		"last_page":    matchers.Integer(1),
		"data":         matchers.EachLike(item, 1),
	}
}

// subscriptionShape is a webhook subscription as every webhook answer
// carries it (never with the secret). Nullable timestamps are pinned to
// the state's null: Pact has no "string or null" rule.
func subscriptionShape() map[string]any {
	return map[string]any{
		"id":                  matchers.Integer(21),
		"company_id":          matchers.Integer(3),
		"company_channel_ids": nil,
		"name":                matchers.Like("CRM integration"),
		"url":                 matchers.Like("https://hooks.example.com/chat-gateway"),
		"events":              matchers.EachLike(matchers.Like("omnichat.message.received"), 1),
		"enabled":             matchers.Like(true),
		"last_success_at":     nil,
		"last_failure_at":     nil,
		"failure_count":       matchers.Integer(0),
		"disabled_reason":     nil,
		"signature_scheme":    matchers.Regex("svc", `^(svc|standard-webhooks)$`),
		"created_at":          managementTime(),
		"updated_at":          managementTime(),
	}
}

// withSecret is the answer of create and rotate-secret.
func withSecret() map[string]any {
	return map[string]any{
		"success": true,
		"data":    subscriptionShape(),
		"secret":  matchers.Regex("9f2c4e7a1b8d3f60c5a2e9b7d4f1083a6c2e5b9d7f4a1c3e8b6d2f0a9c7e5b31", secretRE),
		"message": matchers.Like("Webhook subscription created"),
	}
}

func deliveryShape() map[string]any {
	return map[string]any{
		"id":            matchers.Integer(7781),
		"delivery_id":   matchers.Regex("0b8f3c2e-5d1a-4f7b-9c6e-2a4d8e1f3b57", uuidRE),
		"event":         matchers.Like("ping"),
		"attempt":       matchers.Integer(1),
		"status_code":   matchers.Integer(204),
		"succeeded":     matchers.Like(true),
		"duration_ms":   matchers.Integer(3),
		"error":         nil,
		"delivered_at":  managementTime(),
		"next_retry_at": nil,
		"created_at":    managementTime(),
	}
}

func chatappShape() map[string]any {
	return map[string]any{
		"id":         matchers.Integer(7),
		"key":        matchers.Regex(connectionKey, `^[0-9]{10,15}$`),
		"name":       matchers.Like("Sales team"),
		"logged":     matchers.Like(false),
		"created_at": managementTime(),
		"updated_at": managementTime(),
	}
}

func officialChannelShape() map[string]any {
	return map[string]any{
		"id":              matchers.Integer(12),
		"key":             matchers.Like(officialKey),
		"name":            matchers.Like("Official - Store"),
		"channel_type_id": 3,
		"channel_type":    "Official chat app",
		"platform":        "ofc_chatapp",
		"provider_account": map[string]any{
			"id":                  matchers.Integer(4),
			"business_account_id": matchers.Like("102938475610293"),
			"phone_number_id":     matchers.Like("109876543210987"),
		},
		"created_at": managementTime(),
		"updated_at": managementTime(),
	}
}

// conversationShape is a conversation listed with `with` =
// [contact, providerOpenedWindow] whose contact wrote recently.
func conversationShape() map[string]any {
	return map[string]any{
		"id":                 matchers.Integer(5532),
		"name":               matchers.Like("Ana Souza"),
		"key":                matchers.Like(contactKey),
		"is_group":           matchers.Like(false),
		"status_id":          matchers.Integer(1),
		"company_channel_id": matchers.Integer(12),
		"channel_type_id":    matchers.Integer(3),
		"channel_type":       matchers.Like("Official chat app"),
		"platform":           "ofc_chatapp",
		"origin_id":          matchers.Integer(1),
		"unread_count":       matchers.Integer(1),
		"last_message_at":    offsetTime("2026-11-22T11:01:44-03:00"),
		"created_at":         offsetTime("2026-10-30T09:12:00-03:00"),
		"updated_at":         offsetTime("2026-11-22T11:01:44-03:00"),
		"contact": map[string]any{
			"id":   matchers.Integer(881),
			"name": matchers.Like("Ana Souza"),
		},
		"provider_opened_window": map[string]any{
			"open":              true,
			"expires_at":        offsetTime("2026-11-23T11:01:44-03:00"),
			"remaining_minutes": matchers.Integer(1438),
		},
	}
}

func templateShape() map[string]any {
	return map[string]any{
		"id":          matchers.Integer(31),
		"name":        matchers.Like(templateName),
		"language":    matchers.Like("pt_BR"),
		"has_buttons": matchers.Like(false),
		"category":    matchers.Like("UTILITY"),
		"status":      matchers.Like("APPROVED"),
		"value": map[string]any{
			"name":       matchers.Like(templateName),
			"language":   matchers.Like("pt_BR"),
			"components": matchers.EachLike(map[string]any{"type": matchers.Like("BODY")}, 1),
		},
	}
}

// sendSync is the synchronous send answer (official shape, both
// platforms). Data.raw is diagnostic and outside the contract.
func sendSync(externalID string) map[string]any {
	return map[string]any{
		"Status":  true,
		"Message": matchers.Like("Message sent"),
		"Data":    map[string]any{"ExternalID": matchers.Like(externalID)},
	}
}

func sendQueued() map[string]any {
	return map[string]any{"message": matchers.Like("Message queued for sending")}
}

func editedShape() map[string]any {
	return map[string]any{
		"id":                 matchers.Integer(90412),
		"text":               matchers.Like("Seu pedido saiu para entrega (rastreio BR123456789)."),
		"edited":             true,
		"external_id":        matchers.Like("3EB0C431C26A1916F5A2"),
		"company_channel_id": matchers.Integer(7),
		"contact_channel_id": matchers.Integer(5532),
		"message_type_id":    matchers.Integer(1),
		"updated_at":         matchers.Regex("2026-11-22T14:03:07.123456Z", microUTCRE),
	}
}
