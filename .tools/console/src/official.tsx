// Official channels: each channel's approved templates, with their components and variables, and the
// upload of header media (previewed before upload; its URL usable for 72 hours).
import { useEffect, useState } from "preact/hooks";
import { api, call, type Refusal, type Schemas } from "./api";
import { parseTime, span } from "./time";
import { CopyButton, Done, Empty, Failure, Field, Loading, NotPermitted, Screen, When, type Loaded } from "./ui";

type Channel = Schemas["CompanyChannel"];
type Template = Schemas["Template"];

// variables lists the template's variables in order of appearance: {{1}} or {{first_name}}.
export function variables(t: Template): string[] {
  const seen: string[] = [];
  for (const c of t.value.components) {
    for (const m of (c.text ?? "").matchAll(/\{\{\s*([^{}\s]+)\s*\}\}/g)) {
      const v = m[1];
      if (v !== undefined && !seen.includes(v)) seen.push(v);
    }
  }
  return seen;
}

export async function officialChannels(): Promise<Loaded<Channel[]>> {
  const r = await call(api.GET("/api/company-channels", { params: { query: { channel_type_id: 3, perPage: 100 } } }));
  if (r.ok) return { state: "ok", data: r.data.data };
  return r.status === 403 ? { state: "denied" } : { state: "failed", refusal: r };
}

export function Official() {
  const [channels, setChannels] = useState<Loaded<Channel[]>>({ state: "loading" });
  const load = async () => setChannels(await officialChannels());
  useEffect(() => { void load(); }, []);
  if (channels.state === "loading") return <Screen title="Official channels"><Loading /></Screen>;
  if (channels.state === "denied") return <Screen title="Official channels"><NotPermitted what="the company's channels" /></Screen>;
  return (
    <Screen title="Official channels">
      <p class="lead">Business numbers of the official platform, their approved templates, and header media for sends.</p>
      {channels.state === "failed" && <Failure refusal={channels.refusal} onRetry={() => void load()} />}
      {channels.state === "ok" && channels.data.length === 0 && <Empty>The company has no official channel. An administrator registers one with the provider's account details.</Empty>}
      {channels.state === "ok" && channels.data.map((ch) => <ChannelView key={ch.id} ch={ch} />)}
    </Screen>
  );
}

function ChannelView({ ch }: { ch: Channel }) {
  const [templates, setTemplates] = useState<Loaded<Template[]>>({ state: "loading" });
  useEffect(() => {
    void (async () => {
      const r = await call(api.GET("/api/provider-templates/for-channel", { params: { query: { company_channel_id: ch.id } } }));
      setTemplates(r.ok ? { state: "ok", data: r.data.templates } : r.status === 403 ? { state: "denied" } : { state: "failed", refusal: r });
    })();
  }, [ch.id]);
  return (
    <article class="card wide" aria-labelledby={`ch-${ch.id}`}>
      <h2 id={`ch-${ch.id}`}>{ch.name} <span class="muted">· {ch.key}</span></h2>
      <h3>Templates</h3>
      {templates.state === "loading" && <Loading />}
      {templates.state === "denied" && <NotPermitted what="templates" />}
      {templates.state === "failed" && <Failure refusal={templates.refusal} />}
      {templates.state === "ok" && templates.data.length === 0 && <Empty>No approved template on this channel. Templates are created and approved at the provider, then listed here.</Empty>}
      {templates.state === "ok" && templates.data.length > 0 && (
        <ul class="templates">
          {templates.data.map((t) => {
            const vars = variables(t);
            return (
              <li key={t.id} class="template" data-template={t.name}>
                <h4>{t.name} <span class="muted">· {t.language} · {t.category} · id {t.id}</span></h4>
                <dl>
                  {t.value.components.map((c, i) => (
                    <div key={i} class="component">
                      <dt>{c.type}{c.format ? ` (${c.format})` : ""}</dt>
                      <dd>
                        {c.text && <p class="tpl-text">{c.text}</p>}
                        {c.format && ["IMAGE", "VIDEO", "DOCUMENT"].includes(c.format) && <p class="hint">Takes media: the one registered with the template, or a header media URL given with the send.</p>}
                        {c.buttons && c.buttons.length > 0 && (
                          <ul class="plain">{c.buttons.map((b, j) => <li key={j}>{b.type}: {b.text}{b.url ? ` → ${b.url}` : ""}{b.phone_number ? ` → ${b.phone_number}` : ""}</li>)}</ul>
                        )}
                      </dd>
                    </div>
                  ))}
                </dl>
                <p>{vars.length === 0 ? "No variables." : `Variables, in order: ${vars.map((v) => `{{${v}}}`).join(", ")}`}</p>
              </li>
            );
          })}
        </ul>
      )}
      {ch.provider_account !== null && <Upload accountId={ch.provider_account.id} />}
    </article>
  );
}

function Upload({ accountId }: { accountId: number }) {
  const [file, setFile] = useState<File | null>(null);
  const [preview, setPreview] = useState("");
  const [busy, setBusy] = useState(false);
  const [done, setDone] = useState<Schemas["UploadedMedia"]["data"] | null>(null);
  const [err, setErr] = useState<Refusal | null>(null);
  const [denied, setDenied] = useState(false);
  useEffect(() => {
    if (file === null || !(file.type.startsWith("image/") || file.type.startsWith("video/"))) {
      setPreview("");
      return;
    }
    const url = URL.createObjectURL(file);
    setPreview(url);
    return () => URL.revokeObjectURL(url);
  }, [file]);
  const submit = async (e: Event) => {
    e.preventDefault();
    if (file === null) return;
    setBusy(true);
    const picked = file;
    const r = await call(api.POST("/api/provider-templates/upload-send-media", {
      body: { provider_account_id: accountId, file: picked },
      bodySerializer: (body) => {
        const form = new FormData();
        form.append("provider_account_id", String(body.provider_account_id));
        form.append("file", body.file, picked.name);
        return form;
      },
    }));
    setBusy(false);
    if (r.ok) {
      setErr(null);
      setDone(r.data.data);
    } else if (r.status === 403) {
      setDenied(true);
    } else {
      setErr(r);
    }
  };
  const exp = done ? parseTime(done.expires_at) : null;
  return (
    <form class="upload" onSubmit={(e) => void submit(e)} aria-labelledby={`up-${accountId}`}>
      <h3 id={`up-${accountId}`}>Upload header media</h3>
      <p class="hint">For a template whose header is an image, video or document. The gateway keeps the file for 72 hours; pass its URL as the send's header media within that time.</p>
      <Field label="File" hint="JPEG, PNG or WebP up to 5 MB; MP4 or 3GPP video up to 16 MB; PDF up to 100 MB.">
        <input type="file" name="file" accept="image/jpeg,image/png,image/webp,video/mp4,video/3gpp,application/pdf"
          onChange={(e) => { setDone(null); setFile(e.currentTarget.files?.[0] ?? null); }} required />
      </Field>
      {file && (
        <figure class="preview">
          {preview && file.type.startsWith("image/") && <img src={preview} alt={`Preview of ${file.name}`} />}
          {preview && file.type.startsWith("video/") && <video src={preview} controls muted aria-label={`Preview of ${file.name}`} />}
          <figcaption>{file.name} · {(file.size / 1024).toFixed(0)} kB · {file.type || "unknown type"}</figcaption>
        </figure>
      )}
      <button type="submit" class="primary" disabled={busy || file === null}>{busy ? "Uploading…" : "Upload"}</button>
      {denied && <NotPermitted what="uploads (provider_templates_upload)" />}
      {err && <Failure refusal={err} />}
      {done && (
        <Done>
          <p>Uploaded <strong>{done.filename}</strong>. Use it until <When at={done.expires_at} />{exp ? ` (${span(exp)})` : ""}; after that the URL no longer works.</p>
          <p class="url"><code>{done.url}</code> <CopyButton text={done.url} label="Copy URL" /></p>
        </Done>
      )}
    </form>
  );
}
