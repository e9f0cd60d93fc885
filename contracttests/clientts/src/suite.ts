// The generated-client suite: every operation family of the gateway called through a client
// generated from openapi/openapi.yaml (openapi-typescript types + openapi-fetch), with no casts and
// no `any`. clientts_test.go typechecks it (tsc --noEmit), starts the gateway with the provider and
// chat-app simulators, and validates every answer against its operation in the document through a
// proxy; this program checks what the answers mean (statuses, ids, the rules a client relies on).
import fs from "node:fs";
import http from "node:http";
import type { AddressInfo } from "node:net";
import createClient from "openapi-fetch";
import type { components, paths } from "../gen/openapi.js";

type SendBody = components["schemas"]["SendMessageRequest"];
type MultipartSendBody = components["schemas"]["SendMessageMultipartRequest"];

function env(name: string): string {
  const value = process.env[name];
  if (value === undefined || value === "") {
    throw new Error(`${name} is not set (clientts_test.go sets it)`);
  }
  return value;
}

const base = env("GW");
const officialKey = env("OFFICIAL_KEY");
const companyChannelId = Number(env("COMPANY_CHANNEL_ID"));
const contactKey = env("CONTACT_KEY");
const strangerKey = env("STRANGER_KEY");

function client(token: string) {
  return createClient<paths>({ baseUrl: base, headers: { Authorization: `Bearer ${token}`, Accept: "application/json" } });
}
const api = client(env("TOKEN"));
const broke = client(env("BROKE_TOKEN"));

let checks = 0;
function check(ok: boolean, what: string): void {
  checks++;
  if (!ok) {
    throw new Error(`check failed: ${what}`);
  }
}

// must returns the typed 2xx body, or stops the suite with the status and the error body.
function must<T>(what: string, r: { data?: T; error?: unknown; response: Response }): T {
  if (r.data === undefined) {
    throw new Error(`${what}: ${r.response.status} ${JSON.stringify(r.error)}`);
  }
  checks++;
  return r.data;
}

// The multipart send body as form parts: booleans are the texts true/false, the file a Blob,
// variable_values one part per value, named_variable_values one JSON text part. openapi-fetch
// hands the serializer the operation's body type, which is either media type's schema.
function sendForm(body: SendBody | MultipartSendBody): FormData {
  const form = new FormData();
  for (const [name, value] of Object.entries(body)) {
    if (value instanceof Blob) {
      form.append(name, value, "note.txt");
    } else if (Array.isArray(value)) {
      for (const item of value) {
        form.append(name, String(item));
      }
    } else if (typeof value === "object" && value !== null) {
      form.append(name, JSON.stringify(value));
    } else if (value !== undefined) {
      form.append(name, String(value));
    }
  }
  return form;
}

async function connections(): Promise<{ id: number; key: string }> {
  const key = "5511988887777";
  const created = must("chatappCreate", await api.POST("/api/chatapp-create", { body: { name: "Sales", key } }));
  check(created.data.key === key && !created.data.logged, "a new connection is not logged in");
  const id = created.data.id;

  const qr = must("chatappQrcode", await api.POST("/api/chatapp-qrcode", { body: { id, os: "Linux", browser: "Suite" } }));
  check(qr.success, "QR code answer");
  must("simulatorPair", await api.POST("/api/chatapp-simulator/{id}/pair", { params: { path: { id } } }));

  const list = must("listChatapps", await api.GET("/api/chatapps", {
    params: { query: { orderBy: "name", orderMode: "desc", logged: true, perPage: 10 } },
  }));
  check(list.data.some((c) => c.id === id && c.logged), "the paired connection is listed as logged in");

  const renamed = must("chatappUpdate", await api.POST("/api/chatapp-update", { body: { id, name: "Sales team" } }));
  check(renamed.data.name === "Sales team", "rename");

  must("simulatorSeedContacts", await api.POST("/api/chatapp-simulator/{id}/contacts", {
    params: { path: { id } },
    body: { contacts: [{ key: contactKey, name: "Maria", on_chatapp: true }] },
  }));
  const contacts = must("chatappContactList", await api.POST("/api/chatapp-contact-list", { body: { id } }));
  check(contacts.success, "contact list");
  must("simulatorSeedGroup", await api.POST("/api/chatapp-simulator/{id}/groups", {
    params: { path: { id } },
    body: { key: "120363025246125486", name: "Team", is_admin: true },
  }));
  const groups = must("chatappGroupList", await api.POST("/api/chatapp-group-list", { body: { key } }));
  check(groups.success, "group list");
  const checked = must("chatappCheckOnChatapp", await api.POST("/api/chatapp-check-on-chatapp", {
    body: { id, numbers: [contactKey] },
  }));
  check(checked.success, "number check");
  return { id, key };
}

async function sends(conn: { id: number; key: string }): Promise<number> {
  // Synchronous on the official channel (the contact wrote first: the window is open).
  const official: SendBody = { platform: "ofc_chatapp", sender_key: officialKey, contact_key: contactKey, text: "Oi Maria!", enqueue: false };
  const sync = must("sendMessage sync", await api.POST("/api/api-send-message", { body: official }));
  check("Status" in sync && sync.Status && sync.Data.ExternalID !== "", "a synchronous send answers the provider's id");

  // Queued on the chat-app connection: contact_is_group is required with platform chatapp, and
  // the generated type says so.
  const queued: SendBody = { platform: "chatapp", sender_key: conn.key, contact_key: contactKey, contact_is_group: false, text: "Hi Maria!" };
  const q = must("sendMessage queued", await api.POST("/api/api-send-message", { body: queued }));
  check("message" in q, "a queued send answers {message}");

  // Outside the 24-hour window: free text to a contact who never wrote answers 409.
  const closed = await api.POST("/api/api-send-message", {
    body: { platform: "ofc_chatapp", sender_key: officialKey, contact_key: strangerKey, text: "Hello?" },
  });
  const refusal = closed.error;
  check(closed.response.status === 409 && typeof refusal === "object" && "status" in refusal && refusal.status === false,
    "window closed answers 409 {status: false}");

  // A template starts a conversation; the second company's plan quota is spent: 402 in plain text.
  const templates = must("listProviderTemplatesForChannel", await api.GET("/api/provider-templates/for-channel", {
    params: { query: { company_channel_id: companyChannelId } },
  }));
  const orderUpdate = templates.templates.find((t) => t.name === "order_update");
  check(orderUpdate !== undefined, "the synced templates include order_update");
  const templateId = orderUpdate === undefined ? 0 : orderUpdate.id;
  const started = must("sendMessage template", await api.POST("/api/api-send-message", {
    body: { platform: "ofc_chatapp", sender_key: officialKey, contact_key: strangerKey, provider_template_id: templateId, variable_values: ["Ana", "#48213"], enqueue: false },
  }));
  check("Status" in started && started.Status, "template send");
  const brokeTemplates = must("listProviderTemplatesForChannel (second company)", await broke.GET("/api/provider-templates/for-channel", {
    params: { query: { company_channel_id: await brokeChannelId() } },
  }));
  const brokeTemplate = brokeTemplates.templates.find((t) => t.name === "order_update");
  const quota = await broke.POST("/api/api-send-message", {
    body: { platform: "ofc_chatapp", sender_key: env("BROKE_KEY"), contact_key: contactKey, provider_template_id: brokeTemplate === undefined ? 0 : brokeTemplate.id },
    parseAs: "text",
  });
  check(quota.response.status === 402 && typeof quota.error === "string" && quota.error.length > 0, "over the plan quota answers 402 in plain text");

  // Multipart: a file with its caption, the boundary set by fetch.
  const multipart: MultipartSendBody = {
    platform: "chatapp", sender_key: conn.key, contact_key: contactKey, contact_is_group: false, enqueue: false,
    text: "Here is the note", file: new Blob(["a small note\n"], { type: "text/plain" }),
  };
  const filed = must("sendMessage multipart", await api.POST("/api/api-send-message", { body: multipart, bodySerializer: sendForm }));
  check("Status" in filed && filed.Status, "multipart send");
  // The file of that message (extension): a fresh URL on demand, served back without a token.
  const filedId = await waitForSent("Data" in filed ? filed.Data.ExternalID : "");
  const link = must("getMessageMediaLink", await api.GET("/api/messages/{id}/media", { params: { path: { id: filedId } } }));
  check(link.data.size === 13 && link.data.mime_type.startsWith("text/plain"), "the message's file is described");
  const [, , mediaToken, mediaName] = new URL(link.data.url).pathname.split("/");
  const file = await api.GET("/message-media/{token}/{filename}", {
    params: { path: { token: mediaToken ?? "", filename: mediaName ?? "" } }, parseAs: "blob",
  });
  check(file.response.status === 200 && file.data !== undefined && file.data.size === 13, "the message's file is served back");

  // Edit and revoke act on the chat-app message sent synchronously above.
  const sent = must("simulatorMessages", await api.GET("/api/chatapp-simulator/{id}/messages", { params: { path: { id: conn.id } } }));
  check(sent.data.length >= 1, "the simulator received the sends");
  return conn.id;
}

// A subscriber on loopback: the events the gateway delivers, as an integrator's receiver sees them.
// Event payloads are described by asyncapi/asyncapi.yaml, not by this client: read them with guards.
type SentEvent = { event: string; id: number; externalId: string };
const events: SentEvent[] = [];

function field(value: unknown, name: string): unknown {
  return typeof value === "object" && value !== null && name in value ? Object.getOwnPropertyDescriptor(value, name)?.value : undefined;
}

async function startReceiver(): Promise<{ url: string; close: () => void }> {
  const server = http.createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => { body += chunk; });
    req.on("end", () => {
      const parsed: unknown = JSON.parse(body);
      const data = field(parsed, "data");
      const event = field(parsed, "event");
      const id = field(data, "id");
      const externalId = field(data, "external_id");
      if (typeof event === "string" && typeof id === "number") {
        events.push({ event, id, externalId: typeof externalId === "string" ? externalId : "" });
      }
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address: AddressInfo | string | null = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return { url: `http://127.0.0.1:${port}/events`, close: () => server.close() };
}

// waitForSent waits for the omnichat.message.sent event of the message with this provider id and
// answers the gateway's message id (the send answer carries only the provider's id).
async function waitForSent(externalId: string): Promise<number> {
  for (let i = 0; i < 300; i++) {
    const hit = events.find((e) => e.event === "omnichat.message.sent" && e.externalId === externalId);
    if (hit !== undefined) {
      return hit.id;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`no omnichat.message.sent for ${externalId} within 30 s`);
}

async function webhooks(receiverURL: string): Promise<number> {
  const available = must("listAvailableWebhookEvents", await api.GET("/api/channel-webhooks-available-events"));
  check(available.data.some((e) => e.event === "omnichat.message.sent"), "omnichat.message.sent is available");
  // enabled has a default: the generated create type lets the client omit it.
  const created = must("createChannelWebhook", await api.POST("/api/channel-webhooks", {
    body: { name: "suite receiver", url: receiverURL },
    params: { header: { "Idempotency-Key": "suite-create-1" } },
  }));
  check(created.secret.length >= 32 && created.data.enabled, "created enabled, with its secret");
  const id = created.data.id;
  const list = must("listChannelWebhooks", await api.GET("/api/channel-webhooks", {
    params: { query: { filter: "suite", enabled: true, orderBy: "name", orderMode: "asc" } },
  }));
  check(list.data.some((w) => w.id === id), "the subscription is listed");
  const read = must("getChannelWebhook", await api.GET("/api/channel-webhooks/{id}", { params: { path: { id } } }));
  check(read.data.id === id && !("secret" in read), "one subscription is read, without its secret");
  const updated = must("updateChannelWebhook", await api.PUT("/api/channel-webhooks/{id}", {
    params: { path: { id } }, body: { name: "suite receiver (all events)" },
  }));
  check(updated.data.name === "suite receiver (all events)", "update");
  const ping = must("testChannelWebhook", await api.POST("/api/channel-webhooks/{id}/test", { params: { path: { id } } }));
  check(ping.success && ping.queued >= 1, "test ping queued");
  const rotated = must("rotateChannelWebhookSecret", await api.POST("/api/channel-webhooks/{id}/rotate-secret", { params: { path: { id } } }));
  check(rotated.secret !== created.secret, "rotation answers a new secret");
  return id;
}

async function deliveriesAndDelete(id: number): Promise<void> {
  const deliveries = must("listChannelWebhookDeliveries", await api.GET("/api/channel-webhooks/{id}/deliveries", {
    params: { path: { id }, query: { succeeded: true, perPage: 50 } },
  }));
  check(deliveries.total >= 1, "the receiver's deliveries are logged");
  // Redelivery (extension): one logged delivery again, then every failed one since an hour ago.
  const logged = deliveries.data[0];
  check(logged !== undefined, "a logged delivery to redeliver");
  const again = must("redeliverChannelWebhookDelivery", await api.POST("/api/channel-webhooks/{id}/deliveries/{delivery_id}/redeliver", {
    params: { path: { id, delivery_id: logged === undefined ? "" : logged.delivery_id } },
  }));
  check(again.queued === 1, "redeliver queues the delivery again");
  const recovered = must("recoverChannelWebhookDeliveries", await api.POST("/api/channel-webhooks/{id}/recover", {
    params: { path: { id } }, body: { since: new Date(Date.now() - 3600_000).toISOString() },
  }));
  check(recovered.queued === 0, "nothing failed, nothing to recover");
  must("deleteChannelWebhook", await api.DELETE("/api/channel-webhooks/{id}", { params: { path: { id } } }));
  const gone = await api.DELETE("/api/channel-webhooks/{id}", { params: { path: { id } } });
  check(gone.response.status === 509, "a deleted subscription is not found (509)");
}

async function editAndRevoke(conn: { id: number; key: string }): Promise<void> {
  const sync = must("sendMessage chatapp sync", await api.POST("/api/api-send-message", {
    body: { platform: "chatapp", sender_key: conn.key, contact_key: contactKey, contact_is_group: false, text: "Typo hre", enqueue: false },
  }));
  const externalId = "Data" in sync ? sync.Data.ExternalID : "";
  check(externalId !== "", "the chat app's message id");
  const id = await waitForSent(externalId);
  const edited = must("editMessage", await api.POST("/api/edit-message", { body: { id, text: "Typo here" } }));
  check(edited.edited && edited.text === "Typo here", "edit");
  const revoked = must("revokeMessages", await api.POST("/api/revoke-messages", { body: { ids: [id], scope: "all" } }));
  check(revoked.length === 1 && revoked[0] !== undefined && revoked[0].Status, "revoke for everyone");
  must("simulatorReceipt", await api.POST("/api/chatapp-simulator/{id}/receipts", {
    params: { path: { id: conn.id } }, body: { external_id: externalId, status: "read" },
  }));
}

async function conversations(): Promise<void> {
  const window = must("listContactChannels window", await api.GET("/api/contact-channels", {
    params: { query: { channel_type_id: 3, company_channel_id: companyChannelId, ofc_window_min_minutes: 1,
      with: JSON.stringify(["providerOpenedWindow", "contact"]), orderBy: "last_message_at", orderMode: "desc" } },
  }));
  const maria = window.data.find((c) => c.key === contactKey);
  check(maria !== undefined, "the contact who wrote has an open window");
  const filtered = must("listContactChannels filter", await api.GET("/api/contact-channels", {
    params: { query: { filter: "Maria", show_all_statuses: true, created_at: JSON.stringify(["2000-01-01", "2999-12-31"]) } },
  }));
  check(filtered.total >= 1, "text filter");
  if (maria !== undefined) {
    const pinned = must("updateContactChannel", await api.PATCH("/api/contact-channels/{id}", {
      params: { path: { id: maria.id } }, body: { pinned: true, mark_read: true },
    }));
    check(pinned.data.pinned, "pinned");
  }
}

async function uploads(providerAccountId: number): Promise<void> {
  const png = fs.readFileSync(new URL("../../../../testdata/media/promo.png", import.meta.url));
  const uploaded = must("uploadSendMedia", await api.POST("/api/provider-templates/upload-send-media", {
    body: { provider_account_id: providerAccountId, file: new Blob([png], { type: "image/png" }) },
    bodySerializer: (body) => {
      const form = new FormData();
      form.append("provider_account_id", String(body.provider_account_id));
      form.append("file", body.file, "promo.png");
      return form;
    },
  }));
  check(uploaded.data.url.startsWith("http"), "upload answers a URL");
  const [, , token, filename] = new URL(uploaded.data.url).pathname.split("/");
  check(token !== undefined && filename !== undefined, "the URL is /media/{token}/{filename}");
  const media = await api.GET("/media/{token}/{filename}", {
    params: { path: { token: token ?? "", filename: filename ?? "" } }, parseAs: "blob",
  });
  check(media.response.status === 200 && media.data !== undefined && media.data.size === png.length, "the uploaded media is served back");
}

async function simulatorAndTeardown(conn: { id: number; key: string }): Promise<void> {
  must("simulatorInbound", await api.POST("/api/chatapp-simulator/{id}/inbound", {
    params: { path: { id: conn.id } }, body: { from: contactKey, name: "Maria", text: "Thanks!" },
  }));
  must("chatappLogout", await api.POST("/api/chatapp-logout", { body: { id: conn.id } }));
  const relink = must("chatappQrcode again", await api.POST("/api/chatapp-qrcode", { body: { key: conn.key, os: "Linux", browser: "Suite" } }));
  check(relink.success, "a new pairing after logout");
  must("simulatorPair again", await api.POST("/api/chatapp-simulator/{id}/pair", { params: { path: { id: conn.id } } }));
  // The phone removes the linked device.
  must("simulatorUnlink", await api.POST("/api/chatapp-simulator/{id}/unlink", { params: { path: { id: conn.id } } }));
  must("chatappDelete", await api.POST("/api/chatapp-delete", { body: { id: conn.id } }));
  const list = must("listChatapps after delete", await api.GET("/api/chatapps"));
  check(!list.data.some((c) => c.id === conn.id), "a deleted connection is gone");
}

let brokeChannel: number | undefined;
async function brokeChannelId(): Promise<number> {
  if (brokeChannel === undefined) {
    const page = must("listCompanyChannels (second company)", await broke.GET("/api/company-channels", { params: { query: { channel_type_id: 3 } } }));
    const first = page.data[0];
    check(first !== undefined, "the second company has its official channel");
    brokeChannel = first === undefined ? 0 : first.id;
  }
  return brokeChannel;
}

async function eventStream(): Promise<void> {
  // The live stream (extension): a ticket from an authenticated POST, then the stream with it. The
  // validating proxy reads every answer whole, and a stream never ends, so the suite checks the
  // ticket and the stream's refusal of a ticket it never issued; the stream itself is tested in
  // internal/httpapi (events_stream_test.go) and by make load's events-stream scenario.
  const ticket = must("createEventStreamTicket", await api.POST("/api/events/stream-tickets", {}));
  check(ticket.ticket.length > 0 && Date.parse(ticket.expires_at) > Date.now(), "a stream ticket that has not expired");
  const forged = await api.GET("/api/events/stream", { params: { query: { ticket: "not-a-ticket-we-issued" } }, parseAs: "text" });
  check(forged.response.status === 401, "the stream refuses a ticket it never issued (401)");
}

async function main(): Promise<void> {
  const receiver = await startReceiver();
  try {
    const channels = must("listCompanyChannels", await api.GET("/api/company-channels", { params: { query: { perPage: 100 } } }));
    const official = channels.data.find((c) => c.id === companyChannelId && c.key === officialKey);
    check(official !== undefined && official.provider_account !== null, "the official channel is listed with its provider account");
    const hook = await webhooks(receiver.url);
    const conn = await connections();
    await sends(conn);
    await editAndRevoke(conn);
    await conversations();
    await uploads(official?.provider_account?.id ?? 0);
    await simulatorAndTeardown(conn);
    await deliveriesAndDelete(hook);
    await eventStream();
  } finally {
    receiver.close();
  }
  console.log(`ok: ${checks} checks, ${events.length} events received`);
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
