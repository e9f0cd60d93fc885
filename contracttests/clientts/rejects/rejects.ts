// Requests the document forbids, each written the way a client would write it by mistake: every
// line marked "rejects" must fail to typecheck against the generated types, and no other line may
// fail (clientts_test.go runs tsc on this file and compares). It shows that the rules moved out of
// prose into the schema reach generated clients.
import createClient from "openapi-fetch";
import type { components, paths } from "../gen/openapi.js";

type SendBody = components["schemas"]["SendMessageRequest"];
type MultipartSendBody = components["schemas"]["SendMessageMultipartRequest"];

const api = createClient<paths>({ baseUrl: "http://127.0.0.1:8080" });

// Accepted: the official channel needs no contact_is_group; the chat app gets it.
export const official: SendBody = { platform: "ofc_chatapp", sender_key: "1", contact_key: "2", text: "hi" };
export const unofficial: SendBody = { platform: "chatapp", sender_key: "1", contact_key: "2", contact_is_group: true, text: "hi" };
export const template: SendBody = { platform: "ofc_chatapp", sender_key: "1", contact_key: "2", provider_template_id: 31 };

// contact_is_group is required with platform chatapp, in both body types.
export const noGroupFlag: SendBody = { platform: "chatapp", sender_key: "1", contact_key: "2", text: "hi" }; // rejects
export const noGroupFlagForm: MultipartSendBody = { platform: "chatapp", sender_key: "1", contact_key: "2", text: "hi" }; // rejects
// Only the two platforms exist.
export const fax: SendBody = { platform: "fax", sender_key: "1", contact_key: "2", contact_is_group: true }; // rejects

export async function lists(): Promise<void> {
  // orderMode is one vocabulary on every list: ASC, DESC, asc, desc.
  await api.GET("/api/chatapps", { params: { query: { orderMode: "asc" } } });
  await api.GET("/api/channel-webhooks", { params: { query: { orderMode: "desc" } } });
  await api.GET("/api/contact-channels", { params: { query: { orderMode: "DESC" } } });
  await api.GET("/api/chatapps", { params: { query: { orderMode: "Descending" } } }); // rejects
  // enabled has a default: omitting it is fine; a wrong type is not.
  await api.POST("/api/channel-webhooks", { body: { name: "n", url: "https://example.com/hook" } });
  await api.POST("/api/channel-webhooks", { body: { name: "n", url: "https://example.com/hook", enabled: "yes" } }); // rejects
  // A connection is chosen by id or key: at least one of the two.
  await api.POST("/api/chatapp-logout", { body: { key: "5511988887777" } });
  await api.POST("/api/chatapp-logout", { body: {} }); // rejects
  await api.POST("/api/chatapp-qrcode", { body: { os: "Linux", browser: "Firefox" } }); // rejects
  await api.POST("/api/chatapp-logout", { body: { id: "7" } }); // rejects
  // The revoke scope is me or all, and may be omitted.
  await api.POST("/api/revoke-messages", { body: { ids: [1] } });
  await api.POST("/api/revoke-messages", { body: { ids: [1], scope: "everyone" } }); // rejects
}
