// Webhooks, a consumer portal: subscriptions (create, edit, enable/disable, test, delete), the secret
// rotated and shown once, the delivery log with the document's filters and every attempt, redelivery
// of one delivery or recovery since a time, and why a subscription was disabled.
import { useEffect, useState } from "preact/hooks";
import { api, call, type Refusal, type Schemas } from "./api";
import { useLive } from "./live";
import { Badge, Confirm, CopyButton, Done, Empty, Failure, Field, Loading, NotPermitted, Screen, When, type Loaded } from "./ui";

type Sub = Schemas["WebhookSubscription"];
type Available = { event: string; description: string }[];
type Result = { ok: string } | { refusal: Refusal } | null;

export function Webhooks() {
  const [subs, setSubs] = useState<Loaded<Sub[]>>({ state: "loading" });
  const [available, setAvailable] = useState<Available>([]);
  const [secret, setSecret] = useState<{ name: string; secret: string } | null>(null);
  const [result, setResult] = useState<Result>(null);
  const [panel, setPanel] = useState<{ kind: "edit" | "log"; id: number } | null>(null);
  const [confirm, setConfirm] = useState<{ kind: "delete" | "rotate"; s: Sub } | null>(null);

  const load = async () => {
    const r = await call(api.GET("/api/channel-webhooks", { params: { query: { perPage: 100, orderBy: "name" } } }));
    if (r.ok) setSubs({ state: "ok", data: r.data.data });
    else if (r.status === 403) setSubs({ state: "denied" });
    else setSubs({ state: "failed", refusal: r });
  };
  useLive(load, [], 5000);
  useEffect(() => {
    void (async () => {
      const r = await call(api.GET("/api/channel-webhooks-available-events"));
      if (r.ok) setAvailable(r.data.data);
    })();
  }, []);
  const outcome = async (r: { ok: true } | ({ ok: false } & Refusal), ok: string) => {
    setResult(r.ok ? { ok } : { refusal: r });
    await load();
  };

  if (subs.state === "loading") return <Screen title="Webhooks"><Loading /></Screen>;
  if (subs.state === "denied") return <Screen title="Webhooks"><NotPermitted what="webhook subscriptions" /></Screen>;
  const list = subs.state === "ok" ? subs.data : [];
  return (
    <Screen title="Webhooks">
      <p class="lead">Where the gateway posts its events, what it delivered, and what to send again.</p>
      <SubForm available={available} onSaved={async (name, s) => { if (s !== "") setSecret({ name, secret: s }); setResult({ ok: `Subscription “${name}” created.` }); await load(); }} />
      {secret && (
        <div class="notice secret" role="status" data-testid="secret">
          <h2>Signing secret of “{secret.name}”</h2>
          <p><strong>Copy it now: it is shown only this once.</strong> Your receiver uses it to verify each delivery's signature (see <a href="/docs/events#verify-signature">Verifying a delivery</a>).</p>
          <p class="url"><code>{secret.secret}</code> <CopyButton text={secret.secret} label="Copy secret" /></p>
          <button type="button" onClick={() => setSecret(null)}>I have copied it</button>
        </div>
      )}
      {result !== null && ("ok" in result ? <Done>{result.ok}</Done> : <Failure refusal={result.refusal} />)}
      {subs.state === "failed" && <Failure refusal={subs.refusal} onRetry={() => void load()} />}
      {subs.state === "ok" && list.length === 0 && <Empty>No subscription yet. Create one above with the URL of your receiver.</Empty>}
      <ul class="cards" aria-label="Subscriptions">
        {list.map((s) => (
          <li key={s.id} class="card wide" data-subscription={s.name}>
            <h2>{s.name} {s.enabled ? <Badge tone="good">enabled</Badge> : <Badge tone="bad">disabled</Badge>}</h2>
            <dl>
              <dt>URL</dt><dd class="break">{s.url}</dd>
              <dt>Events</dt><dd>{s.events.length === 0 ? "all" : s.events.join(", ")}</dd>
              <dt>Signature</dt><dd>{s.signature_scheme === "svc" ? "X-Svc-Signature (HMAC-SHA256)" : "Standard Webhooks"}</dd>
              <dt>Last success</dt><dd><When at={s.last_success_at} /></dd>
              <dt>Last failure</dt><dd><When at={s.last_failure_at} /></dd>
              <dt>Failures in a row</dt><dd>{s.failure_count}</dd>
            </dl>
            {!s.enabled && (
              <div class="notice warn" data-testid="disabled-why">
                {s.disabled_reason
                  ? <p><strong>Disabled by the gateway:</strong> {s.disabled_reason}. It stops a subscription after 20 events in a row failed all 5 attempts. Fix the receiver, then press “Enable”: the failure count starts again at 0 and new events are delivered. Use “Recover” in the delivery log to send what failed meanwhile.</p>
                  : <p><strong>Disabled by hand</strong> (from this console or the API): no event is delivered. Press “Enable” to deliver again.</p>}
              </div>
            )}
            <div class="actions">
              <button type="button" onClick={() => setPanel(panel?.kind === "log" && panel.id === s.id ? null : { kind: "log", id: s.id })}>Delivery log<span class="sr"> of {s.name}</span></button>
              <button type="button" onClick={() => setPanel({ kind: "edit", id: s.id })}>Edit<span class="sr"> {s.name}</span></button>
              <button type="button" onClick={() => void (async () => outcome(await call(api.PUT("/api/channel-webhooks/{id}", { params: { path: { id: s.id } }, body: { enabled: !s.enabled } })), s.enabled ? `“${s.name}” disabled.` : `“${s.name}” enabled.`))()}>
                {s.enabled ? "Disable" : "Enable"}<span class="sr"> {s.name}</span>
              </button>
              <button type="button" onClick={() => void (async () => { const r = await call(api.POST("/api/channel-webhooks/{id}/test", { params: { path: { id: s.id } } })); await outcome(r, r.ok ? `Test event queued to “${s.name}” (${r.data.queued}). It shows in the delivery log.` : ""); })()}>Test<span class="sr"> {s.name}</span></button>
              <button type="button" onClick={() => setConfirm({ kind: "rotate", s })}>Rotate secret<span class="sr"> of {s.name}</span></button>
              <button type="button" class="danger" onClick={() => setConfirm({ kind: "delete", s })}>Delete<span class="sr"> {s.name}</span></button>
            </div>
            {panel?.id === s.id && panel.kind === "edit" && (
              <SubForm available={available} sub={s} onSaved={async () => { setPanel(null); setResult({ ok: `“${s.name}” saved.` }); await load(); }} onClose={() => setPanel(null)} />
            )}
            {panel?.id === s.id && panel.kind === "log" && <Log sub={s} available={available} />}
          </li>
        ))}
      </ul>
      {confirm?.kind === "delete" && (
        <Confirm title={`Delete “${confirm.s.name}”?`} action="Delete for good" onCancel={() => setConfirm(null)}
          onConfirm={() => { const s = confirm.s; setConfirm(null); setPanel(null); void (async () => outcome(await call(api.DELETE("/api/channel-webhooks/{id}", { params: { path: { id: s.id } } })), `“${s.name}” deleted.`))(); }}>
          <p>What is lost: the subscription, its secret and its delivery log. Events from now on are not delivered to {confirm.s.url}, and nothing can be redelivered to it.</p>
        </Confirm>
      )}
      {confirm?.kind === "rotate" && (
        <Confirm title={`Rotate the secret of “${confirm.s.name}”?`} action="Rotate" onCancel={() => setConfirm(null)}
          onConfirm={() => { const s = confirm.s; setConfirm(null); void (async () => {
            const r = await call(api.POST("/api/channel-webhooks/{id}/rotate-secret", { params: { path: { id: s.id } } }));
            if (r.ok) setSecret({ name: s.name, secret: r.data.secret });
            await outcome(r, `Secret of “${s.name}” rotated.`);
          })(); }}>
          <p>The next delivery is signed with a new secret; the current one stops working at once. Your receiver must get the new secret, which is shown only once.</p>
        </Confirm>
      )}
    </Screen>
  );
}

function SubForm({ available, sub, onSaved, onClose }: { available: Available; sub?: Sub; onSaved: (name: string, secret: string) => Promise<void>; onClose?: () => void }) {
  const [name, setName] = useState(sub?.name ?? "");
  const [url, setURL] = useState(sub?.url ?? "");
  const [events, setEvents] = useState<string[]>(sub?.events ?? []);
  const [scheme, setScheme] = useState<Schemas["WebhookSignatureScheme"]>(sub?.signature_scheme ?? "svc");
  const [err, setErr] = useState<Refusal | null>(null);
  const id = sub ? `sub-${sub.id}` : "sub-new";
  const submit = async (e: Event) => {
    e.preventDefault();
    const body = { name: name.trim(), url: url.trim(), events, signature_scheme: scheme };
    if (sub) {
      const r = await call(api.PUT("/api/channel-webhooks/{id}", { params: { path: { id: sub.id } }, body }));
      if (!r.ok) setErr(r);
      else await onSaved(r.data.data.name, "");
      return;
    }
    const r = await call(api.POST("/api/channel-webhooks", { body }));
    if (!r.ok) {
      setErr(r);
      return;
    }
    setErr(null);
    setName("");
    setURL("");
    setEvents([]);
    await onSaved(r.data.data.name, r.data.secret);
  };
  return (
    <form class={sub ? "panel" : "inline"} onSubmit={(e) => void submit(e)} aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>{sub ? `Edit “${sub.name}”` : "New subscription"}</h2>
      <Field label="Name"><input name="name" value={name} maxLength={150} onInput={(e) => setName(e.currentTarget.value)} required /></Field>
      <Field label="Receiver URL" hint="http or https; https is recommended."><input name="url" type="url" value={url} onInput={(e) => setURL(e.currentTarget.value)} required /></Field>
      <details>
        <summary>Events: {events.length === 0 ? "all" : `${events.length} chosen`}</summary>
        <p class="hint">None chosen means every event.</p>
        <div class="events">
          {available.map((a) => (
            <label key={a.event} class="check" title={a.description}>
              <input type="checkbox" checked={events.includes(a.event)} onChange={(e) => setEvents(e.currentTarget.checked ? [...events, a.event] : events.filter((x) => x !== a.event))} /> {a.event}
            </label>
          ))}
        </div>
      </details>
      <Field label="Signature">
        <select value={scheme} onChange={(e) => setScheme(e.currentTarget.value === "standard-webhooks" ? "standard-webhooks" : "svc")}>
          <option value="svc">X-Svc-Signature (HMAC-SHA256)</option>
          <option value="standard-webhooks">Standard Webhooks</option>
        </select>
      </Field>
      <div class="actions">
        <button type="submit" class="primary">{sub ? "Save" : "Create"}</button>
        {onClose && <button type="button" onClick={onClose}>Cancel</button>}
      </div>
      {err && <Failure refusal={err} />}
    </form>
  );
}

function Log({ sub, available }: { sub: Sub; available: Available }) {
  const [event, setEvent] = useState("");
  const [succeeded, setSucceeded] = useState<"" | "true" | "false">("");
  const [page, setPage] = useState(1);
  const [log, setLog] = useState<Loaded<Schemas["WebhookDeliveryPage"]>>({ state: "loading" });
  const [since, setSince] = useState("");
  const [result, setResult] = useState<Result>(null);
  const load = async () => {
    const r = await call(api.GET("/api/channel-webhooks/{id}/deliveries", { params: { path: { id: sub.id }, query: {
      perPage: 50, page, ...(event !== "" ? { event } : {}), ...(succeeded !== "" ? { succeeded: succeeded === "true" } : {}),
    } } }));
    if (r.ok) setLog({ state: "ok", data: r.data });
    else if (r.status === 403) setLog({ state: "denied" });
    else setLog({ state: "failed", refusal: r });
  };
  useLive(load, [sub.id, event, succeeded, page]);
  const redeliver = async (deliveryId: string) => {
    const r = await call(api.POST("/api/channel-webhooks/{id}/deliveries/{delivery_id}/redeliver", { params: { path: { id: sub.id, delivery_id: deliveryId } } }));
    setResult(r.ok ? { ok: `Delivery ${deliveryId} queued again (${r.data.queued}); its new attempt appears below.` } : { refusal: r });
    await load();
  };
  const recover = async (e: Event) => {
    e.preventDefault();
    const d = new Date(since);
    if (Number.isNaN(d.getTime())) return;
    const r = await call(api.POST("/api/channel-webhooks/{id}/recover", { params: { path: { id: sub.id } }, body: { since: d.toISOString() } }));
    setResult(r.ok ? { ok: r.data.queued === 0 ? "Nothing failed since then: nothing to send again." : `${r.data.queued} failed deliveries queued again.` } : { refusal: r });
    await load();
  };
  return (
    <div class="panel log" data-testid="delivery-log">
      <h3>Delivery log</h3>
      <form class="filters" onSubmit={(e) => e.preventDefault()} aria-label="Delivery filters">
        <Field label="Event">
          <select name="event" value={event} onChange={(e) => { setEvent(e.currentTarget.value); setPage(1); }}>
            <option value="">All events</option>
            {available.map((a) => <option key={a.event} value={a.event}>{a.event}</option>)}
          </select>
        </Field>
        <Field label="Outcome">
          <select name="succeeded" value={succeeded} onChange={(e) => { const v = e.currentTarget.value; setSucceeded(v === "true" || v === "false" ? v : ""); setPage(1); }}>
            <option value="">All attempts</option><option value="true">Succeeded</option><option value="false">Failed</option>
          </select>
        </Field>
      </form>
      <form class="inline" onSubmit={(e) => void recover(e)}>
        <Field label="Recover failed deliveries since" hint="Your local time. Every event whose delivery failed since then is sent again.">
          <input type="datetime-local" name="since" value={since} onInput={(e) => setSince(e.currentTarget.value)} required />
        </Field>
        <button type="submit">Recover</button>
      </form>
      {result !== null && ("ok" in result ? <Done>{result.ok}</Done> : <Failure refusal={result.refusal} />)}
      {log.state === "loading" && <Loading />}
      {log.state === "denied" && <NotPermitted what="the delivery log" />}
      {log.state === "failed" && <Failure refusal={log.refusal} onRetry={() => void load()} />}
      {log.state === "ok" && log.data.data.length === 0 && <Empty>No attempt {event !== "" || succeeded !== "" ? "matches these filters" : "yet: events are logged here as they are delivered"}.</Empty>}
      {log.state === "ok" && log.data.data.length > 0 && (
        <>
          <ul class="attempts" aria-label="Attempts, newest first">
            {log.data.data.map((d) => {
              // A redelivery counts its attempts from 1 again under the same delivery id; which
              // sending of the delivery an entry belongs to is its rank among that id's first attempts.
              const sending = log.data.data.filter((x) => x.delivery_id === d.delivery_id && x.attempt === 1 && x.id <= d.id).length;
              return (
              <li key={d.id} class="attempt" data-delivery={d.delivery_id} data-event={d.event} data-attempt={d.attempt} data-sending={sending}>
                <p><strong>{d.event}</strong> · {sending > 1 ? `redelivery ${sending - 1}, ` : ""}attempt {d.attempt} · {d.succeeded ? <Badge tone="good">delivered</Badge> : <Badge tone="bad">failed</Badge>}</p>
                <dl>
                  <dt>When</dt><dd><When at={d.delivered_at ?? d.created_at} /></dd>
                  <dt>Answer</dt><dd>{d.status_code === 0 ? "no answer" : `HTTP ${d.status_code}`} in {d.duration_ms} ms</dd>
                  {d.error && <><dt>Error</dt><dd>{d.error}</dd></>}
                  {d.next_retry_at && <><dt>Next try</dt><dd><When at={d.next_retry_at} /></dd></>}
                  <dt>Delivery</dt><dd class="break"><code>{d.delivery_id}</code></dd>
                </dl>
                <button type="button" onClick={() => void redeliver(d.delivery_id)}>Redeliver<span class="sr"> {d.event} {d.delivery_id}</span></button>
              </li>
              );
            })}
          </ul>
          <nav class="pager" aria-label="Log pages">
            <button type="button" disabled={page <= 1} onClick={() => setPage(page - 1)}>Newer</button>
            <span>Page {log.data.current_page} of {log.data.last_page}</span>
            <button type="button" disabled={page >= log.data.last_page} onClick={() => setPage(page + 1)}>Older</button>
          </nav>
        </>
      )}
    </div>
  );
}
