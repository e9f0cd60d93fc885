// Verifies deliveries of the gateway with the npm standardwebhooks package,
// an implementation of the Standard Webhooks specification written by others.
// The Go test contracttests/webhookevents (TestStandardWebhooksIndependentCheck)
// captures real deliveries and runs this script.
//
// stdin:  {"secret": "whsec_…", "wrong_secret": "whsec_…",
//          "deliveries": [{"name": "…", "headers": {"webhook-id": "…", …}, "body_base64": "…"}]}
// stdout: one JSON array, per delivery: {name, verified, error, delivery_id,
//          tampered_rejected, wrong_secret_rejected}
import { Webhook } from "standardwebhooks";

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const input = JSON.parse(Buffer.concat(chunks).toString("utf8"));

const wh = new Webhook(input.secret);
const wrong = new Webhook(input.wrong_secret);

const rejects = (hook, body, headers) => {
  try {
    hook.verify(body, headers);
    return false;
  } catch {
    return true;
  }
};

const results = input.deliveries.map((d) => {
  const body = Buffer.from(d.body_base64, "base64");
  const out = { name: d.name, verified: false, error: null, delivery_id: null };
  try {
    const payload = wh.verify(body, d.headers); // the exact bytes received
    out.verified = true;
    out.delivery_id = payload.delivery_id;
  } catch (err) {
    out.error = String(err && err.message ? err.message : err);
  }
  // The check must be able to fail: a changed body and another secret.
  out.tampered_rejected = rejects(wh, Buffer.concat([body, Buffer.from(" ")]), d.headers);
  out.wrong_secret_rejected = rejects(wrong, body, d.headers);
  return out;
});
process.stdout.write(JSON.stringify(results) + "\n");
