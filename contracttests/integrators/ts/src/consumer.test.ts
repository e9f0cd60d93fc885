// The consumer pact an integrator team writes for the webhook events it
// uses, in TypeScript with pact-js: a CRM sync that reacts to
// crm.business.won and omnichat.message.received. contracttests/README.md
// shows it; copy it into your own repository.
//
// What lets the gateway's provider verify this pact: provider
// "gateway-webhooks", messages described as "a delivery of <event>", the
// state "a subscription with a known signing secret" with a `secret`
// parameter, and matchers by type and format (the provider sends a fresh
// delivery, not the document's example).
import { test } from "node:test";
import assert from "node:assert/strict";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { MatchersV3, MessageConsumerPact, synchronousBodyHandler } from "@pact-foundation/pact";

const { like, integer, regex, uuid } = MatchersV3;

const here = path.dirname(fileURLToPath(import.meta.url));
const STATE = "a subscription with a known signing secret";
const SECRET = "whsec_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const OFFSET_DATE_TIME = String.raw`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?([+-]\d{2}:\d{2}|Z)$`;

// The integrator's handlers under test: they read only what they use.
interface WonDeal {
  event: string;
  company_id: number;
  data: { id: number; title: string };
}

export function handleWon(body: unknown): WonDeal {
  const d = body as WonDeal;
  if (d.event !== "crm.business.won" || !Number.isInteger(d.data?.id)) {
    throw new Error(`not a won deal: ${JSON.stringify(body)}`);
  }
  return d;
}

interface Inbound {
  event: string;
  data: { text: string; contact_channel_key: string };
}

export function handleInbound(body: unknown): Inbound {
  const m = body as Inbound;
  if (!/^[0-9]{8,15}$/.test(m.data?.contact_channel_key ?? "")) {
    throw new Error(`no contact key: ${JSON.stringify(body)}`);
  }
  return m;
}

function pact(): MessageConsumerPact {
  return new MessageConsumerPact({
    consumer: "example-crm-sync-ts",
    provider: "gateway-webhooks",
    dir: path.resolve(here, "..", "..", "pacts"),
    logLevel: "warn",
  });
}

test("a delivery of crm.business.won", async () => {
  let got: WonDeal | undefined;
  await pact()
    .given({ name: STATE, params: { secret: SECRET } })
    .expectsToReceive("a delivery of crm.business.won")
    .withMetadata({ "X-Svc-Event": "crm.business.won" })
    .withContent({
      event: "crm.business.won",
      delivery_id: uuid("9d7c2a1e-4b3f-4e5a-8c6d-2f1e0a9b8c7d"),
      company_id: integer(1042),
      occurred_at: regex(OFFSET_DATE_TIME, "2025-03-20T16:45:00-03:00"),
      data: { id: integer(5531), title: like("Plano Empresarial - Souza Transportes") },
    })
    .verify(synchronousBodyHandler((body: unknown) => {
      got = handleWon(body);
    }));
  assert.equal(got?.data.id, 5531);
});

test("a delivery of omnichat.message.received", async () => {
  let got: Inbound | undefined;
  await pact()
    .given({ name: STATE, params: { secret: SECRET } })
    .expectsToReceive("a delivery of omnichat.message.received")
    .withMetadata({ "X-Svc-Event": "omnichat.message.received" })
    .withContent({
      event: "omnichat.message.received",
      delivery_id: uuid("9d7c2a1e-4b3f-4e5a-8c6d-2f1e0a9b8c7d"),
      data: {
        text: like("Foto do produto que chegou quebrado"),
        contact_channel_key: regex("^[0-9]{8,15}$", "5511912345678"),
      },
    })
    .verify(synchronousBodyHandler((body: unknown) => {
      got = handleInbound(body);
    }));
  assert.equal(got?.data.contact_channel_key, "5511912345678");
});
