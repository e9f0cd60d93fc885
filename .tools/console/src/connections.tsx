// Connections: the chat-app connections with their live state, pairing by QR code or phone code,
// and each connection's contacts, groups and number check.
import { useEffect, useState } from "preact/hooks";
import { api, call, type Refusal, type Schemas } from "./api";
import { useLive } from "./live";
import { parseTime, span } from "./time";
import { Badge, Confirm, Done, Empty, Failure, Field, Loading, NotPermitted, Screen, When, type Loaded } from "./ui";

type Chatapp = Schemas["Chatapp"];
type Panel = { kind: "pair" | "details" | "rename" | "number"; id: number } | null;

const stateWords: Record<Schemas["ChatappState"], [string, "good" | "bad" | "warn" | "info"]> = {
  connected: ["Connected", "good"],
  disconnected: ["Disconnected, reconnecting", "warn"],
  logged_out: ["Not paired", "info"],
  replaced: ["Taken over by another client", "warn"],
  banned: ["Banned for a while", "bad"],
  outdated: ["Gateway too old for the chat app", "bad"],
  failed: ["Refused, retrying", "bad"],
};

export function stateOf(c: Chatapp): Schemas["ChatappState"] {
  return c.state ?? (c.logged ? "connected" : "logged_out");
}

export function Connections() {
  const [list, setList] = useState<Loaded<Chatapp[]>>({ state: "loading" });
  const [panel, setPanel] = useState<Panel>(null);
  const [confirm, setConfirm] = useState<{ kind: "delete" | "logout"; c: Chatapp } | null>(null);
  const [result, setResult] = useState<{ ok: string } | { refusal: Refusal } | null>(null);

  const load = async () => {
    const r = await call(api.GET("/api/chatapps", { params: { query: { perPage: 100, orderBy: "name" } } }));
    if (r.ok) setList({ state: "ok", data: r.data.data });
    else if (r.status === 403) setList({ state: "denied" });
    else setList({ state: "failed", refusal: r });
  };
  // A state change on the event stream switches a pairing to "connected" the moment it completes.
  // Without the stream (a token that may not read it) the list is polled, more often while pairing.
  useLive(load, [panel?.kind === "pair"], panel?.kind === "pair" ? 1000 : 3000, ["chatapp.connection.state_changed"]);

  const act = async (what: Promise<{ ok: true } | ({ ok: false } & Refusal)>, ok: string) => {
    const r = await what;
    setResult(r.ok ? { ok } : { refusal: r });
    await load();
  };

  if (list.state === "loading") return <Screen title="Connections"><Loading /></Screen>;
  if (list.state === "denied") return <Screen title="Connections"><NotPermitted what="connections" /></Screen>;
  const conns = list.state === "ok" ? list.data : [];
  const open = panel === null ? undefined : conns.find((c) => c.id === panel.id);

  return (
    <Screen title="Connections">
      <p class="lead">Chat-app numbers linked to the gateway as a linked device. The state updates live.</p>
      <Create onCreated={async (c) => { setResult({ ok: `Connection “${c.name}” created. Pair it to start sending.` }); await load(); setPanel({ kind: "pair", id: c.id }); }} />
      {result !== null && ("ok" in result ? <Done>{result.ok}</Done> : <Failure refusal={result.refusal} />)}
      {list.state === "failed" && <Failure refusal={list.refusal} onRetry={() => void load()} />}
      {list.state === "ok" && conns.length === 0 && <Empty>No connection yet. Create one above with a name and the phone number it will use, then pair it.</Empty>}
      <ul class="cards" aria-label="Connections">
        {conns.map((c) => {
          const [words, tone] = stateWords[stateOf(c)];
          return (
            <li key={c.id} class={open?.id === c.id ? "card wide" : "card"} data-connection={c.key}>
              <h2>{c.name}</h2>
              <dl>
                <dt>Number</dt><dd>{c.key}</dd>
                <dt>State</dt><dd data-testid="state"><Badge tone={tone}>{words}</Badge>{c.state_reason ? <span class="reason"> {c.state_reason}</span> : null}</dd>
                <dt>Updated</dt><dd><When at={c.updated_at} /></dd>
              </dl>
              <div class="actions">
                {!c.logged && <button type="button" class="primary" onClick={() => setPanel({ kind: "pair", id: c.id })}>Pair<span class="sr"> {c.name}</span></button>}
                <button type="button" onClick={() => setPanel({ kind: "details", id: c.id })}>Contacts and groups<span class="sr"> of {c.name}</span></button>
                <button type="button" onClick={() => setPanel({ kind: "rename", id: c.id })}>Rename<span class="sr"> {c.name}</span></button>
                <button type="button" onClick={() => setPanel({ kind: "number", id: c.id })}>Change number<span class="sr"> of {c.name}</span></button>
                {c.logged && <button type="button" onClick={() => setConfirm({ kind: "logout", c })}>Log out<span class="sr"> {c.name}</span></button>}
                <button type="button" class="danger" onClick={() => setConfirm({ kind: "delete", c })}>Delete<span class="sr"> {c.name}</span></button>
              </div>
              {open?.id === c.id && panel?.kind === "pair" && <Pair c={c} onClose={() => setPanel(null)} />}
              {open?.id === c.id && panel?.kind === "details" && <Details c={c} onClose={() => setPanel(null)} />}
              {open?.id === c.id && (panel?.kind === "rename" || panel?.kind === "number") && (
                <Edit c={c} kind={panel.kind} onDone={async (msg) => { setPanel(null); setResult({ ok: msg }); await load(); }} onClose={() => setPanel(null)} />
              )}
            </li>
          );
        })}
      </ul>
      {confirm?.kind === "delete" && (
        <Confirm title={`Delete “${confirm.c.name}”?`} action="Delete for good"
          onCancel={() => setConfirm(null)}
          onConfirm={() => { const c = confirm.c; setConfirm(null); setPanel(null); void act(call(api.POST("/api/chatapp-delete", { body: { id: c.id } })), `Connection “${c.name}” deleted.`); }}>
          <p>This cannot be undone. What is lost:</p>
          <ul>
            <li>the connection {confirm.c.key} and its pairing: the phone drops the linked device;</li>
            <li>all its conversations and messages, with their stored files.</li>
          </ul>
        </Confirm>
      )}
      {confirm?.kind === "logout" && (
        <Confirm title={`Log out “${confirm.c.name}”?`} action="Log out"
          onCancel={() => setConfirm(null)}
          onConfirm={() => { const c = confirm.c; setConfirm(null); void act(call(api.POST("/api/chatapp-logout", { body: { id: c.id } })), `“${c.name}” logged out.`); }}>
          <p>The phone drops this linked device and the connection stops sending and receiving until it is paired again with a new QR code. Its conversations stay.</p>
        </Confirm>
      )}
    </Screen>
  );
}

function Create({ onCreated }: { onCreated: (c: Chatapp) => Promise<void> }) {
  const [name, setName] = useState("");
  const [key, setKey] = useState("");
  const [err, setErr] = useState<Refusal | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const r = await call(api.POST("/api/chatapp-create", { body: { name: name.trim(), key: key.trim() } }));
    if (!r.ok) {
      setErr(r);
      return;
    }
    setErr(null);
    setName("");
    setKey("");
    await onCreated(r.data.data);
  };
  return (
    <form class="inline" onSubmit={(e) => void submit(e)} aria-labelledby="create-title">
      <h2 id="create-title">New connection</h2>
      <Field label="Name"><input name="name" value={name} onInput={(e) => setName(e.currentTarget.value)} required maxLength={150} /></Field>
      <Field label="Phone number" hint="Digits with country code, e.g. 5511988887777">
        <input name="key" value={key} inputMode="numeric" pattern="[1-9][0-9]{9,14}" onInput={(e) => setKey(e.currentTarget.value)} required />
      </Field>
      <button type="submit" class="primary">Create</button>
      {err && <Failure refusal={err} />}
    </form>
  );
}

function Edit({ c, kind, onDone, onClose }: { c: Chatapp; kind: "rename" | "number"; onDone: (msg: string) => Promise<void>; onClose: () => void }) {
  const [value, setValue] = useState(kind === "rename" ? c.name : c.key);
  const [err, setErr] = useState<Refusal | null>(null);
  const submit = async (e: Event) => {
    e.preventDefault();
    const body = kind === "rename" ? { id: c.id, name: value.trim() } : { id: c.id, key: c.key, new_key: value.trim() };
    const r = await call(api.POST("/api/chatapp-update", { body }));
    if (!r.ok) setErr(r);
    else await onDone(kind === "rename" ? `Renamed to “${r.data.data.name}”.` : `Number changed to ${r.data.data.key}.`);
  };
  return (
    <form class="panel" onSubmit={(e) => void submit(e)}>
      <Field label={kind === "rename" ? "New name" : "New number"} hint={kind === "number" ? "Digits with country code. The connection must be paired again with the new number." : undefined}>
        <input value={value} onInput={(e) => setValue(e.currentTarget.value)} required autoFocus />
      </Field>
      <div class="actions">
        <button type="submit" class="primary">Save</button>
        <button type="button" onClick={onClose}>Cancel</button>
      </div>
      {err && <Failure refusal={err} />}
    </form>
  );
}

// Pair shows a QR code to scan (or a code to type on the phone), replaces it before it expires, and
// says "connected" as soon as the live list shows the connection logged in.
function Pair({ c, onClose }: { c: Chatapp; onClose: () => void }) {
  const [byCode, setByCode] = useState(false);
  const [qr, setQr] = useState<Schemas["ChatappQrcode"] | null>(null);
  const [err, setErr] = useState<Refusal | null>(null);
  const [now, setNow] = useState(Date.now());
  const connected = c.logged;

  const fetchCode = async () => {
    const r = await call(api.POST("/api/chatapp-qrcode", { body: { id: c.id, os: "Gateway console", browser: "Console", phone_code: byCode } }));
    if (r.ok) {
      setErr(null);
      setQr(r.data.data);
    } else {
      setErr(r);
    }
  };
  useEffect(() => {
    if (connected) return;
    void fetchCode();
  }, [byCode, connected]);
  // Replace the code a little before it expires, so the phone never scans a dead one.
  useEffect(() => {
    if (connected || qr === null) return;
    const exp = parseTime(qr.expires_at);
    const wait = exp === null ? 20000 : Math.max(1000, exp.getTime() - Date.now() - 5000);
    const t = setTimeout(() => void fetchCode(), wait);
    return () => clearTimeout(t);
  }, [qr, connected]);
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(t);
  }, []);

  if (connected) {
    return (
      <div class="panel pair" data-testid="pair">
        <div class="notice ok" role="status" data-testid="paired"><p><strong>Connected.</strong> {c.name} ({c.key}) is paired and ready to send.</p></div>
        <button type="button" onClick={onClose}>Close</button>
      </div>
    );
  }
  const exp = qr ? parseTime(qr.expires_at) : null;
  return (
    <div class="panel pair" data-testid="pair">
      <h3>Pair {c.name}</h3>
      <p role="status" data-testid="pair-state">Waiting for the phone… The page switches to “connected” by itself.</p>
      {!byCode && (
        <ol class="steps">
          <li>On the phone, open the chat app, then Settings → Linked devices → Link a device.</li>
          <li>Point the phone at this code.</li>
        </ol>
      )}
      {byCode && <p>On the phone choose “Link with phone number instead” and type this code:</p>}
      {qr && !byCode && <img class="qr" src={qr.qrcode} data-expires={exp?.toISOString()} alt={`QR code to link ${c.key} as a device; it is replaced before it expires`} width={320} height={320} />}
      {qr && byCode && <p class="phonecode" data-testid="phone-code">{qr.code !== "" ? qr.code : "The chat app gave no code; use the QR code instead."}</p>}
      {exp && <p class="hint">This code is replaced automatically before it expires ({span(exp, now)}).</p>}
      {err && <Failure refusal={err} onRetry={() => void fetchCode()} />}
      <div class="actions">
        <button type="button" onClick={() => setByCode(!byCode)}>{byCode ? "Show the QR code instead" : "Pair by phone code instead"}</button>
        <button type="button" onClick={onClose}>Close</button>
      </div>
    </div>
  );
}

function Details({ c, onClose }: { c: Chatapp; onClose: () => void }) {
  const [contacts, setContacts] = useState<Loaded<Schemas["ChatappContact"][]>>({ state: "loading" });
  const [groups, setGroups] = useState<Loaded<Schemas["ChatappGroup"][]>>({ state: "loading" });
  const [numbers, setNumbers] = useState("");
  const [checked, setChecked] = useState<Loaded<Schemas["ChatappNumberCheck"][]> | null>(null);
  useEffect(() => {
    void (async () => {
      const r = await call(api.POST("/api/chatapp-contact-list", { body: { id: c.id } }));
      setContacts(r.ok ? { state: "ok", data: r.data.data } : r.status === 403 ? { state: "denied" } : { state: "failed", refusal: r });
      const g = await call(api.POST("/api/chatapp-group-list", { body: { key: c.key } }));
      setGroups(g.ok ? { state: "ok", data: g.data.data } : g.status === 403 ? { state: "denied" } : { state: "failed", refusal: g });
    })();
  }, [c.id]);
  const check = async (e: Event) => {
    e.preventDefault();
    const list = numbers.split(/[\s,;]+/).filter((n) => n !== "");
    const r = await call(api.POST("/api/chatapp-check-on-chatapp", { body: { id: c.id, numbers: list } }));
    setChecked(r.ok ? { state: "ok", data: r.data.data } : { state: "failed", refusal: r });
  };
  const notLogged = !c.logged ? <Empty>The connection is not paired: pair it to read its contacts and groups.</Empty> : null;
  return (
    <div class="panel details">
      <h3>Contacts</h3>
      {contacts.state === "loading" && <Loading />}
      {contacts.state === "denied" && <NotPermitted what="this connection's contacts" />}
      {contacts.state === "failed" && (notLogged ?? <Failure refusal={contacts.refusal} />)}
      {contacts.state === "ok" && contacts.data.length === 0 && <Empty>The phone has no contacts yet.</Empty>}
      {contacts.state === "ok" && contacts.data.length > 0 && (
        <ul class="plain">{contacts.data.map((x) => <li key={x.key}>{x.name || x.notify || "(no name)"} — {x.key}</li>)}</ul>
      )}
      <h3>Groups</h3>
      {groups.state === "loading" && <Loading />}
      {groups.state === "denied" && <NotPermitted what="this connection's groups" />}
      {groups.state === "failed" && (notLogged ?? <Failure refusal={groups.refusal} />)}
      {groups.state === "ok" && groups.data.length === 0 && <Empty>This number is in no group.</Empty>}
      {groups.state === "ok" && groups.data.length > 0 && (
        <ul class="plain">{groups.data.map((g) => (
          <li key={g.key}>{g.name} — {g.key} · {g.participants_count} participants{g.is_admin ? " · administrator" : ""}{g.announce ? " · only administrators send" : ""}</li>
        ))}</ul>
      )}
      <h3>Number check</h3>
      <form onSubmit={(e) => void check(e)}>
        <Field label="Numbers to check" hint="Digits with country code, separated by spaces or commas (up to 500).">
          <textarea rows={2} value={numbers} onInput={(e) => setNumbers(e.currentTarget.value)} required />
        </Field>
        <button type="submit">Check</button>
      </form>
      {checked?.state === "failed" && <Failure refusal={checked.refusal} />}
      {checked?.state === "ok" && (
        <ul class="plain" aria-label="Number check results">{checked.data.map((n) => (
          <li key={n.number}>{n.number}: {n.exists ? `uses the chat app (${n.key ?? ""})` : "does not use the chat app"}</li>
        ))}</ul>
      )}
      <button type="button" onClick={onClose}>Close</button>
    </div>
  );
}
