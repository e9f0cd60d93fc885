// Send: text, a file or a template, on the chat-app connections or the official channels. Every
// documented refusal is said in words (see plain in api.ts): 409 window closed, 400 group not
// authorised, 402 quota, 429 with its wait.
import { useEffect, useState } from "preact/hooks";
import { api, call, type Refusal, type Schemas } from "./api";
import { officialChannels, variables } from "./official";
import { Done, Failure, Field, NotPermitted, Screen } from "./ui";

type SendBody = Schemas["SendMessageRequest"];
type MultipartBody = Schemas["SendMessageMultipartRequest"];
type Platform = Schemas["SendPlatform"];
type Kind = "text" | "file" | "template";
type Sender = { key: string; label: string; channelId?: number };

function sendForm(body: SendBody | MultipartBody, name: string): FormData {
  const form = new FormData();
  for (const [k, value] of Object.entries(body)) {
    if (value instanceof Blob) form.append(k, value, name);
    else if (Array.isArray(value)) value.forEach((item) => form.append(k, String(item)));
    else if (typeof value === "object" && value !== null) form.append(k, JSON.stringify(value));
    else if (value !== undefined) form.append(k, String(value));
  }
  return form;
}

export function Send() {
  const [platform, setPlatform] = useState<Platform>("chatapp");
  const [kind, setKind] = useState<Kind>("text");
  const [senders, setSenders] = useState<Record<Platform, Sender[]>>({ chatapp: [], ofc_chatapp: [] });
  const [sender, setSender] = useState("");
  const [contact, setContact] = useState("");
  const [group, setGroup] = useState(false);
  const [queue, setQueue] = useState(false);
  const [text, setText] = useState("");
  const [file, setFile] = useState<File | null>(null);
  const [templates, setTemplates] = useState<Schemas["Template"][]>([]);
  const [templateId, setTemplateId] = useState("");
  const [values, setValues] = useState<Record<string, string>>({});
  const [headerURL, setHeaderURL] = useState("");
  const [busy, setBusy] = useState(false);
  const [wait, setWait] = useState(0);
  const [result, setResult] = useState<{ ok: string } | { refusal: Refusal } | null>(null);

  useEffect(() => {
    void (async () => {
      const conns = await call(api.GET("/api/chatapps", { params: { query: { perPage: 100 } } }));
      const official = await officialChannels();
      setSenders({
        chatapp: conns.ok ? conns.data.data.map((c) => ({ key: c.key, label: `${c.name}${c.logged ? "" : " (not paired)"}` })) : [],
        ofc_chatapp: official.state === "ok" ? official.data.map((c) => ({ key: c.key, label: c.name, channelId: c.id })) : [],
      });
    })();
  }, []);
  const channel = senders.ofc_chatapp.find((s) => s.key === sender);
  useEffect(() => {
    if (platform !== "ofc_chatapp" || channel?.channelId === undefined) {
      setTemplates([]);
      return;
    }
    const id = channel.channelId;
    void (async () => {
      const r = await call(api.GET("/api/provider-templates/for-channel", { params: { query: { company_channel_id: id } } }));
      setTemplates(r.ok ? r.data.templates : []);
    })();
  }, [platform, channel?.channelId]);
  useEffect(() => {
    if (wait <= 0) return;
    const t = setTimeout(() => setWait(wait - 1), 1000);
    return () => clearTimeout(t);
  }, [wait]);

  const template = templates.find((t) => String(t.id) === templateId);
  const vars = template ? variables(template) : [];

  const submit = async (e: Event) => {
    e.preventDefault();
    setBusy(true);
    setResult(null);
    const common = { sender_key: sender.trim(), contact_key: contact.trim(), contact_is_group: group, enqueue: queue };
    let content: Partial<SendBody> = {};
    if (kind === "text" || kind === "file") content = text.trim() !== "" ? { text } : {};
    if (kind === "template" && template) {
      const positional = vars.every((v) => /^\d+$/.test(v));
      content = {
        provider_template_id: template.id,
        ...(positional ? { variable_values: vars.map((v) => values[v] ?? "") } : { named_variable_values: Object.fromEntries(vars.map((v) => [v, values[v] ?? ""])) }),
        ...(headerURL.trim() !== "" ? { header_media_url: headerURL.trim() } : {}),
      };
    }
    const body: SendBody = platform === "chatapp" ? { ...common, ...content, platform: "chatapp" } : { ...common, ...content, platform: "ofc_chatapp" };
    let r;
    if (kind === "file" && file !== null) {
      // A file goes with its caption only (templates are JSON sends).
      const caption = text.trim() !== "" ? { text } : {};
      const multipart: MultipartBody = platform === "chatapp"
        ? { ...common, ...caption, file, platform: "chatapp" }
        : { ...common, ...caption, file, platform: "ofc_chatapp" };
      const name = file.name;
      r = await call(api.POST("/api/api-send-message", { body: multipart, bodySerializer: (b) => sendForm(b, name) }));
    } else {
      r = await call(api.POST("/api/api-send-message", { body }));
    }
    setBusy(false);
    if (r.ok) {
      const d = r.data;
      setResult({ ok: "Status" in d
        ? (d.Status ? `Sent: the ${platform === "chatapp" ? "chat app" : "provider"} accepted it (message id ${d.Data.ExternalID}). Its delivery shows in the conversation and in webhooks.` : "The outcome is unknown: the answer was lost. The message stays pending until its receipt arrives.")
        : `Queued: ${d.message}. It is sent in the background.` });
    } else {
      if (r.status === 429) setWait(r.retryAfter ?? 1);
      setResult({ refusal: r });
    }
  };

  const list = senders[platform];
  if (result !== null && "refusal" in result && result.refusal.status === 403) {
    return <Screen title="Send"><NotPermitted what="sending messages (messages_send)" /></Screen>;
  }
  return (
    <Screen title="Send">
      <form class="send" onSubmit={(e) => void submit(e)}>
        <fieldset>
          <legend>Platform</legend>
          <label class="check"><input type="radio" name="platform" value="chatapp" checked={platform === "chatapp"} onChange={() => { setPlatform("chatapp"); setSender(""); if (kind === "template") setKind("text"); }} /> Chat app (a paired connection)</label>
          <label class="check"><input type="radio" name="platform" value="ofc_chatapp" checked={platform === "ofc_chatapp"} onChange={() => { setPlatform("ofc_chatapp"); setSender(""); }} /> Official channel</label>
        </fieldset>
        <Field label="From" hint={list.length === 0 ? "Type the sender's number: no channel of this platform could be listed." : "The number that sends."}>
          {list.length > 0
            ? <select name="sender" value={sender} onChange={(e) => setSender(e.currentTarget.value)} required>
                <option value="">Choose…</option>
                {list.map((s) => <option key={s.key} value={s.key}>{s.label} · {s.key}</option>)}
              </select>
            : <input name="sender" value={sender} onInput={(e) => setSender(e.currentTarget.value)} required inputMode="numeric" />}
        </Field>
        <Field label="To" hint="The contact's number with country code, or a group key.">
          <input name="contact" value={contact} onInput={(e) => setContact(e.currentTarget.value)} required />
        </Field>
        <label class="check"><input type="checkbox" name="group" checked={group} onChange={(e) => setGroup(e.currentTarget.checked)} /> The recipient is a group</label>
        <fieldset>
          <legend>Content</legend>
          <label class="check"><input type="radio" name="kind" value="text" checked={kind === "text"} onChange={() => setKind("text")} /> Text</label>
          <label class="check"><input type="radio" name="kind" value="file" checked={kind === "file"} onChange={() => setKind("file")} /> File</label>
          <label class="check"><input type="radio" name="kind" value="template" checked={kind === "template"} disabled={platform !== "ofc_chatapp"} onChange={() => setKind("template")} /> Template{platform !== "ofc_chatapp" ? " (official channels only)" : ""}</label>
        </fieldset>
        {kind === "file" && (
          <Field label="File" hint="An image, PDF, video, audio or other document, up to 100 MB.">
            <input type="file" name="file" onChange={(e) => setFile(e.currentTarget.files?.[0] ?? null)} required />
          </Field>
        )}
        {(kind === "text" || kind === "file") && (
          <Field label={kind === "file" ? "Caption (optional)" : "Message"}>
            <textarea name="text" rows={3} value={text} onInput={(e) => setText(e.currentTarget.value)} required={kind === "text"} />
          </Field>
        )}
        {kind === "template" && (
          <>
            <Field label="Template" hint={templates.length === 0 ? "Choose an official sender first; its approved templates are listed here." : undefined}>
              <select name="template" value={templateId} onChange={(e) => { setTemplateId(e.currentTarget.value); setValues({}); }} required>
                <option value="">Choose…</option>
                {templates.map((t) => <option key={t.id} value={String(t.id)}>{t.name} ({t.language})</option>)}
              </select>
            </Field>
            {template && template.value.components.map((c, i) => c.text ? <p key={i} class="tpl-text"><strong>{c.type}:</strong> {c.text}</p> : null)}
            {vars.map((v) => (
              <Field key={v} label={`Value of {{${v}}}`}>
                <input value={values[v] ?? ""} onInput={(e) => setValues({ ...values, [v]: e.currentTarget.value })} required />
              </Field>
            ))}
            {template?.value.components.some((c) => c.type === "HEADER" && ["IMAGE", "VIDEO", "DOCUMENT"].includes(c.format ?? "")) && (
              <Field label="Header media URL (optional)" hint="Upload one under Official channels; it works for 72 hours.">
                <input type="url" value={headerURL} onInput={(e) => setHeaderURL(e.currentTarget.value)} />
              </Field>
            )}
          </>
        )}
        <label class="check"><input type="checkbox" checked={queue} onChange={(e) => setQueue(e.currentTarget.checked)} /> Queue it (answer at once, send in the background)</label>
        <button type="submit" class="primary" disabled={busy || wait > 0}>{busy ? "Sending…" : wait > 0 ? `Wait ${wait} s` : "Send"}</button>
      </form>
      <div aria-live="polite">
        {result !== null && ("ok" in result ? <Done><p data-testid="sent">{result.ok}</p></Done> : <Failure refusal={result.refusal} context="send" />)}
      </div>
    </Screen>
  );
}
